from google.protobuf import struct_pb2 as _struct_pb2
from bastion.transports.grpc.proto.authorizer.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class User(_message.Message):
    __slots__ = ("id", "email", "email_verified", "signup_methods", "given_name", "family_name", "middle_name", "nickname", "preferred_username", "gender", "birthdate", "phone_number", "phone_number_verified", "picture", "roles", "created_at", "updated_at", "revoked_timestamp", "is_multi_factor_auth_enabled", "app_data", "has_skipped_mfa_setup_at", "mfa_locked_at", "enrolled_mfa_methods")
    ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    SIGNUP_METHODS_FIELD_NUMBER: _ClassVar[int]
    GIVEN_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_NAME_FIELD_NUMBER: _ClassVar[int]
    MIDDLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NICKNAME_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_USERNAME_FIELD_NUMBER: _ClassVar[int]
    GENDER_FIELD_NUMBER: _ClassVar[int]
    BIRTHDATE_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    PICTURE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    IS_MULTI_FACTOR_AUTH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    APP_DATA_FIELD_NUMBER: _ClassVar[int]
    HAS_SKIPPED_MFA_SETUP_AT_FIELD_NUMBER: _ClassVar[int]
    MFA_LOCKED_AT_FIELD_NUMBER: _ClassVar[int]
    ENROLLED_MFA_METHODS_FIELD_NUMBER: _ClassVar[int]
    id: str
    email: str
    email_verified: bool
    signup_methods: str
    given_name: str
    family_name: str
    middle_name: str
    nickname: str
    preferred_username: str
    gender: str
    birthdate: str
    phone_number: str
    phone_number_verified: bool
    picture: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    created_at: int
    updated_at: int
    revoked_timestamp: int
    is_multi_factor_auth_enabled: bool
    app_data: _common_pb2.AppData
    has_skipped_mfa_setup_at: int
    mfa_locked_at: int
    enrolled_mfa_methods: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., email: _Optional[str] = ..., email_verified: _Optional[bool] = ..., signup_methods: _Optional[str] = ..., given_name: _Optional[str] = ..., family_name: _Optional[str] = ..., middle_name: _Optional[str] = ..., nickname: _Optional[str] = ..., preferred_username: _Optional[str] = ..., gender: _Optional[str] = ..., birthdate: _Optional[str] = ..., phone_number: _Optional[str] = ..., phone_number_verified: _Optional[bool] = ..., picture: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ..., revoked_timestamp: _Optional[int] = ..., is_multi_factor_auth_enabled: _Optional[bool] = ..., app_data: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ..., has_skipped_mfa_setup_at: _Optional[int] = ..., mfa_locked_at: _Optional[int] = ..., enrolled_mfa_methods: _Optional[_Iterable[str]] = ...) -> None: ...

class AuthResponse(_message.Message):
    __slots__ = ("message", "should_show_email_otp_screen", "should_show_mobile_otp_screen", "should_show_totp_screen", "access_token", "id_token", "refresh_token", "expires_in", "user", "authenticator_scanner_image", "authenticator_secret", "authenticator_recovery_codes", "should_offer_webauthn_mfa_verify", "should_offer_email_otp_mfa_setup", "should_offer_sms_otp_mfa_setup")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHOW_EMAIL_OTP_SCREEN_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHOW_MOBILE_OTP_SCREEN_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHOW_TOTP_SCREEN_FIELD_NUMBER: _ClassVar[int]
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ID_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REFRESH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATOR_SCANNER_IMAGE_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATOR_SECRET_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATOR_RECOVERY_CODES_FIELD_NUMBER: _ClassVar[int]
    SHOULD_OFFER_WEBAUTHN_MFA_VERIFY_FIELD_NUMBER: _ClassVar[int]
    SHOULD_OFFER_EMAIL_OTP_MFA_SETUP_FIELD_NUMBER: _ClassVar[int]
    SHOULD_OFFER_SMS_OTP_MFA_SETUP_FIELD_NUMBER: _ClassVar[int]
    message: str
    should_show_email_otp_screen: bool
    should_show_mobile_otp_screen: bool
    should_show_totp_screen: bool
    access_token: str
    id_token: str
    refresh_token: str
    expires_in: int
    user: User
    authenticator_scanner_image: str
    authenticator_secret: str
    authenticator_recovery_codes: _containers.RepeatedScalarFieldContainer[str]
    should_offer_webauthn_mfa_verify: bool
    should_offer_email_otp_mfa_setup: bool
    should_offer_sms_otp_mfa_setup: bool
    def __init__(self, message: _Optional[str] = ..., should_show_email_otp_screen: _Optional[bool] = ..., should_show_mobile_otp_screen: _Optional[bool] = ..., should_show_totp_screen: _Optional[bool] = ..., access_token: _Optional[str] = ..., id_token: _Optional[str] = ..., refresh_token: _Optional[str] = ..., expires_in: _Optional[int] = ..., user: _Optional[_Union[User, _Mapping]] = ..., authenticator_scanner_image: _Optional[str] = ..., authenticator_secret: _Optional[str] = ..., authenticator_recovery_codes: _Optional[_Iterable[str]] = ..., should_offer_webauthn_mfa_verify: _Optional[bool] = ..., should_offer_email_otp_mfa_setup: _Optional[bool] = ..., should_offer_sms_otp_mfa_setup: _Optional[bool] = ...) -> None: ...

class Permission(_message.Message):
    __slots__ = ("object", "relation")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    object: str
    relation: str
    def __init__(self, object: _Optional[str] = ..., relation: _Optional[str] = ...) -> None: ...

class FgaRelationInput(_message.Message):
    __slots__ = ("relation", "object")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    relation: str
    object: str
    def __init__(self, relation: _Optional[str] = ..., object: _Optional[str] = ...) -> None: ...

class FgaTupleInput(_message.Message):
    __slots__ = ("user", "relation", "object")
    USER_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    user: str
    relation: str
    object: str
    def __init__(self, user: _Optional[str] = ..., relation: _Optional[str] = ..., object: _Optional[str] = ...) -> None: ...

class PermissionCheckInput(_message.Message):
    __slots__ = ("relation", "object", "contextual_tuples", "context")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CONTEXTUAL_TUPLES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    relation: str
    object: str
    contextual_tuples: _containers.RepeatedCompositeFieldContainer[FgaTupleInput]
    context: _struct_pb2.Struct
    def __init__(self, relation: _Optional[str] = ..., object: _Optional[str] = ..., contextual_tuples: _Optional[_Iterable[_Union[FgaTupleInput, _Mapping]]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PermissionCheckResult(_message.Message):
    __slots__ = ("relation", "object", "allowed", "error")
    class Error(_message.Message):
        __slots__ = ("code", "message")
        CODE_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_FIELD_NUMBER: _ClassVar[int]
        code: str
        message: str
        def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    relation: str
    object: str
    allowed: bool
    error: PermissionCheckResult.Error
    def __init__(self, relation: _Optional[str] = ..., object: _Optional[str] = ..., allowed: _Optional[bool] = ..., error: _Optional[_Union[PermissionCheckResult.Error, _Mapping]] = ...) -> None: ...

class Meta(_message.Message):
    __slots__ = ("version", "client_id", "is_google_login_enabled", "is_facebook_login_enabled", "is_github_login_enabled", "is_linkedin_login_enabled", "is_apple_login_enabled", "is_discord_login_enabled", "is_twitter_login_enabled", "is_microsoft_login_enabled", "is_twitch_login_enabled", "is_roblox_login_enabled", "is_email_verification_enabled", "is_basic_authentication_enabled", "is_magic_link_login_enabled", "is_sign_up_enabled", "is_strong_password_enabled", "is_multi_factor_auth_enabled", "is_mobile_basic_authentication_enabled", "is_phone_verification_enabled", "is_webauthn_enabled")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    IS_GOOGLE_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_FACEBOOK_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_GITHUB_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_LINKEDIN_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_APPLE_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_DISCORD_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_TWITTER_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_MICROSOFT_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_TWITCH_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_ROBLOX_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_EMAIL_VERIFICATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_BASIC_AUTHENTICATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_MAGIC_LINK_LOGIN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_SIGN_UP_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_STRONG_PASSWORD_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_MULTI_FACTOR_AUTH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_MOBILE_BASIC_AUTHENTICATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_PHONE_VERIFICATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    IS_WEBAUTHN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    version: str
    client_id: str
    is_google_login_enabled: bool
    is_facebook_login_enabled: bool
    is_github_login_enabled: bool
    is_linkedin_login_enabled: bool
    is_apple_login_enabled: bool
    is_discord_login_enabled: bool
    is_twitter_login_enabled: bool
    is_microsoft_login_enabled: bool
    is_twitch_login_enabled: bool
    is_roblox_login_enabled: bool
    is_email_verification_enabled: bool
    is_basic_authentication_enabled: bool
    is_magic_link_login_enabled: bool
    is_sign_up_enabled: bool
    is_strong_password_enabled: bool
    is_multi_factor_auth_enabled: bool
    is_mobile_basic_authentication_enabled: bool
    is_phone_verification_enabled: bool
    is_webauthn_enabled: bool
    def __init__(self, version: _Optional[str] = ..., client_id: _Optional[str] = ..., is_google_login_enabled: _Optional[bool] = ..., is_facebook_login_enabled: _Optional[bool] = ..., is_github_login_enabled: _Optional[bool] = ..., is_linkedin_login_enabled: _Optional[bool] = ..., is_apple_login_enabled: _Optional[bool] = ..., is_discord_login_enabled: _Optional[bool] = ..., is_twitter_login_enabled: _Optional[bool] = ..., is_microsoft_login_enabled: _Optional[bool] = ..., is_twitch_login_enabled: _Optional[bool] = ..., is_roblox_login_enabled: _Optional[bool] = ..., is_email_verification_enabled: _Optional[bool] = ..., is_basic_authentication_enabled: _Optional[bool] = ..., is_magic_link_login_enabled: _Optional[bool] = ..., is_sign_up_enabled: _Optional[bool] = ..., is_strong_password_enabled: _Optional[bool] = ..., is_multi_factor_auth_enabled: _Optional[bool] = ..., is_mobile_basic_authentication_enabled: _Optional[bool] = ..., is_phone_verification_enabled: _Optional[bool] = ..., is_webauthn_enabled: _Optional[bool] = ...) -> None: ...
