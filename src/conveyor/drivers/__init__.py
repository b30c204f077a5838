"""Database drivers. Each keeps its schema, migrations and statements together as SQL,
behind the domain operations of ``operations``; ``base`` and ``aio`` hold the seam they
share (a driver and its asynchronous twin)."""
