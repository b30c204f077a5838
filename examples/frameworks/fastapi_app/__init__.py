"""A FastAPI application that enqueues a welcome email in the same transaction as the
signup that asks for it, with conveyor's API and dashboard mounted under ``/queue``.

    export CONVEYOR_DATABASE_URL=sqlite:///signups.db  # or postgresql://…[?schema=…], mysql://…
    python -m examples.frameworks.fastapi_app          # http://127.0.0.1:8000/queue/
    conveyor worker --app examples.frameworks.fastapi_app.tasks:tasks
"""
