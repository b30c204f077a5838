#!/usr/bin/env python
"""The Django shop's command line (run it from this directory):

export DATABASE_URL=sqlite:////tmp/shop.db          # or postgresql://user@host/shop,
                                                    # mysql://user@host/shop (mysqlclient)
python manage.py migrate
python manage.py runserver
python manage.py conveyor_worker --concurrency 4
python manage.py test shop
"""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
