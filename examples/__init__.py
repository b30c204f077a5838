"""Runnable examples: five applications that each used to hand-build a queue."""
