"""The hosted login pages under ``/app`` (``--enable-login-page``): server-rendered HTML
forms over the one service layer. See :mod:`transports.pages.views`."""

from transports.pages.views import register_login_pages

__all__ = ["register_login_pages"]
