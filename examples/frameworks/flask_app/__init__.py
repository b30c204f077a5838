"""A Flask library catalogue: adding a book enqueues its catalogue sync in the same
transaction, through the ``Conveyor`` extension; ``flask conveyor worker`` runs it.

    export DATABASE_URL=sqlite:////tmp/library.db       # or postgresql://…, mysql://…
    flask --app examples.frameworks.flask_app init-db
    flask --app examples.frameworks.flask_app conveyor migrate
    flask --app examples.frameworks.flask_app run
    flask --app examples.frameworks.flask_app conveyor worker
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask

from examples.frameworks.flask_app import db, views
from examples.frameworks.flask_app.extensions import conveyor_


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config["DATABASE_URL"] = os.environ.get("DATABASE_URL", "sqlite:///library.db")
    app.config.update(config or {})
    # The queue lives in the application's database: a book and its job commit together.
    app.config.setdefault("CONVEYOR_DATABASE_URL", app.config["DATABASE_URL"])
    db.init_app(app)
    conveyor_.init_app(app)
    app.register_blueprint(views.books)
    return app
