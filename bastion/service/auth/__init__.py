"""Authentication: signup, login and its second factors, sessions and tokens, email and
phone verification, password reset, magic links, self-service profile and MFA.

The facade is :class:`service.auth.service.AuthService`.
"""
