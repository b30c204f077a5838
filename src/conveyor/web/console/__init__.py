"""The operator's console: overview, jobs, job detail, workers and schedules in the
browser, with admin actions for admins.

The server sends one HTML shell for every console page and the ES modules and CSS under
``static/``; the page reads everything else from the JSON API, as the signed-in role
may. Nothing is built with Node and nothing loads from elsewhere: the files ship inside
the package, and the Content-Security-Policy allows this server's own scripts and
styles only."""

from conveyor.web.console.pages import CSP, install

__all__ = ["CSP", "install"]
