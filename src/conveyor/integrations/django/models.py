"""No models: conveyor's tables are its own, created and upgraded by conveyor when
``manage.py migrate`` runs (see ``apps.py``). This module makes Django send this app
its ``post_migrate`` signal."""
