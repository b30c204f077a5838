"""conveyor inside FastAPI, Django and Flask applications (docs/frameworks.md)."""
