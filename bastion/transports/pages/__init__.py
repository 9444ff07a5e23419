"""The hosted login pages under ``/app`` (``--enable-login-page``): server-rendered HTML
forms over the one service layer. See :mod:`transports.pages.views`. Imports
``service``, ``core`` and ``transports.http``; no other transport."""

from bastion.transports.pages.views import login_page_views

__all__ = ["login_page_views"]
