from google.protobuf import struct_pb2 as _struct_pb2
from bastion.transports.grpc.proto.authorizer.v1 import common_pb2 as _common_pb2
from bastion.transports.grpc.proto.authorizer.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SignupRequest(_message.Message):
    __slots__ = ("email", "phone_number", "password", "confirm_password", "given_name", "family_name", "middle_name", "nickname", "gender", "birthdate", "picture", "roles", "scope", "redirect_uri", "is_multi_factor_auth_enabled", "state", "app_data")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    GIVEN_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_NAME_FIELD_NUMBER: _ClassVar[int]
    MIDDLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NICKNAME_FIELD_NUMBER: _ClassVar[int]
    GENDER_FIELD_NUMBER: _ClassVar[int]
    BIRTHDATE_FIELD_NUMBER: _ClassVar[int]
    PICTURE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    IS_MULTI_FACTOR_AUTH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    APP_DATA_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    password: str
    confirm_password: str
    given_name: str
    family_name: str
    middle_name: str
    nickname: str
    gender: str
    birthdate: str
    picture: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    scope: _containers.RepeatedScalarFieldContainer[str]
    redirect_uri: str
    is_multi_factor_auth_enabled: bool
    state: str
    app_data: _common_pb2.AppData
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., password: _Optional[str] = ..., confirm_password: _Optional[str] = ..., given_name: _Optional[str] = ..., family_name: _Optional[str] = ..., middle_name: _Optional[str] = ..., nickname: _Optional[str] = ..., gender: _Optional[str] = ..., birthdate: _Optional[str] = ..., picture: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., scope: _Optional[_Iterable[str]] = ..., redirect_uri: _Optional[str] = ..., is_multi_factor_auth_enabled: _Optional[bool] = ..., state: _Optional[str] = ..., app_data: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ...) -> None: ...

class LoginRequest(_message.Message):
    __slots__ = ("email", "phone_number", "password", "roles", "scope", "state")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    password: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    scope: _containers.RepeatedScalarFieldContainer[str]
    state: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., password: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., scope: _Optional[_Iterable[str]] = ..., state: _Optional[str] = ...) -> None: ...

class LogoutRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogoutResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class MagicLinkLoginRequest(_message.Message):
    __slots__ = ("email", "roles", "scope", "state", "redirect_uri")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    email: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    scope: _containers.RepeatedScalarFieldContainer[str]
    state: str
    redirect_uri: str
    def __init__(self, email: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., scope: _Optional[_Iterable[str]] = ..., state: _Optional[str] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class MagicLinkLoginResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class VerifyEmailRequest(_message.Message):
    __slots__ = ("token", "state")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    token: str
    state: str
    def __init__(self, token: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ResendVerifyEmailRequest(_message.Message):
    __slots__ = ("email", "identifier", "state")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    email: str
    identifier: str
    state: str
    def __init__(self, email: _Optional[str] = ..., identifier: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ResendVerifyEmailResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class VerifyOtpRequest(_message.Message):
    __slots__ = ("email", "phone_number", "otp", "is_totp", "state")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    OTP_FIELD_NUMBER: _ClassVar[int]
    IS_TOTP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    otp: str
    is_totp: bool
    state: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., otp: _Optional[str] = ..., is_totp: _Optional[bool] = ..., state: _Optional[str] = ...) -> None: ...

class ResendOtpRequest(_message.Message):
    __slots__ = ("email", "phone_number", "state")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    state: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ResendOtpResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ForgotPasswordRequest(_message.Message):
    __slots__ = ("email", "phone_number", "state", "redirect_uri")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    state: str
    redirect_uri: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., state: _Optional[str] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class ForgotPasswordResponse(_message.Message):
    __slots__ = ("message", "should_show_mobile_otp_screen")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHOW_MOBILE_OTP_SCREEN_FIELD_NUMBER: _ClassVar[int]
    message: str
    should_show_mobile_otp_screen: bool
    def __init__(self, message: _Optional[str] = ..., should_show_mobile_otp_screen: _Optional[bool] = ...) -> None: ...

class ResetPasswordRequest(_message.Message):
    __slots__ = ("token", "otp", "phone_number", "password", "confirm_password")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    OTP_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    token: str
    otp: str
    phone_number: str
    password: str
    confirm_password: str
    def __init__(self, token: _Optional[str] = ..., otp: _Optional[str] = ..., phone_number: _Optional[str] = ..., password: _Optional[str] = ..., confirm_password: _Optional[str] = ...) -> None: ...

class ResetPasswordResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ProfileRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UpdateProfileRequest(_message.Message):
    __slots__ = ("old_password", "new_password", "confirm_new_password", "email", "given_name", "family_name", "middle_name", "nickname", "gender", "birthdate", "phone_number", "picture", "is_multi_factor_auth_enabled", "app_data", "otp", "regenerate_recovery_codes")
    OLD_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    NEW_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_NEW_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    GIVEN_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_NAME_FIELD_NUMBER: _ClassVar[int]
    MIDDLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NICKNAME_FIELD_NUMBER: _ClassVar[int]
    GENDER_FIELD_NUMBER: _ClassVar[int]
    BIRTHDATE_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PICTURE_FIELD_NUMBER: _ClassVar[int]
    IS_MULTI_FACTOR_AUTH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    APP_DATA_FIELD_NUMBER: _ClassVar[int]
    OTP_FIELD_NUMBER: _ClassVar[int]
    REGENERATE_RECOVERY_CODES_FIELD_NUMBER: _ClassVar[int]
    old_password: str
    new_password: str
    confirm_new_password: str
    email: str
    given_name: str
    family_name: str
    middle_name: str
    nickname: str
    gender: str
    birthdate: str
    phone_number: str
    picture: str
    is_multi_factor_auth_enabled: bool
    app_data: _common_pb2.AppData
    otp: str
    regenerate_recovery_codes: bool
    def __init__(self, old_password: _Optional[str] = ..., new_password: _Optional[str] = ..., confirm_new_password: _Optional[str] = ..., email: _Optional[str] = ..., given_name: _Optional[str] = ..., family_name: _Optional[str] = ..., middle_name: _Optional[str] = ..., nickname: _Optional[str] = ..., gender: _Optional[str] = ..., birthdate: _Optional[str] = ..., phone_number: _Optional[str] = ..., picture: _Optional[str] = ..., is_multi_factor_auth_enabled: _Optional[bool] = ..., app_data: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ..., otp: _Optional[str] = ..., regenerate_recovery_codes: _Optional[bool] = ...) -> None: ...

class UpdateProfileResponse(_message.Message):
    __slots__ = ("message", "authenticator_recovery_codes")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATOR_RECOVERY_CODES_FIELD_NUMBER: _ClassVar[int]
    message: str
    authenticator_recovery_codes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, message: _Optional[str] = ..., authenticator_recovery_codes: _Optional[_Iterable[str]] = ...) -> None: ...

class DeactivateAccountRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeactivateAccountResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("refresh_token",)
    REFRESH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    refresh_token: str
    def __init__(self, refresh_token: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("roles", "scope", "state", "required_relations")
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_RELATIONS_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[str]
    scope: _containers.RepeatedScalarFieldContainer[str]
    state: str
    required_relations: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaRelationInput]
    def __init__(self, roles: _Optional[_Iterable[str]] = ..., scope: _Optional[_Iterable[str]] = ..., state: _Optional[str] = ..., required_relations: _Optional[_Iterable[_Union[_types_pb2.FgaRelationInput, _Mapping]]] = ...) -> None: ...

class ValidateJwtTokenRequest(_message.Message):
    __slots__ = ("token_type", "token", "roles", "required_relations")
    TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_RELATIONS_FIELD_NUMBER: _ClassVar[int]
    token_type: str
    token: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    required_relations: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaRelationInput]
    def __init__(self, token_type: _Optional[str] = ..., token: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., required_relations: _Optional[_Iterable[_Union[_types_pb2.FgaRelationInput, _Mapping]]] = ...) -> None: ...

class ValidateJwtTokenResponse(_message.Message):
    __slots__ = ("is_valid", "claims")
    IS_VALID_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    is_valid: bool
    claims: _common_pb2.AppData
    def __init__(self, is_valid: _Optional[bool] = ..., claims: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ...) -> None: ...

class ValidateSessionRequest(_message.Message):
    __slots__ = ("cookie", "roles", "required_relations")
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_RELATIONS_FIELD_NUMBER: _ClassVar[int]
    cookie: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    required_relations: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaRelationInput]
    def __init__(self, cookie: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., required_relations: _Optional[_Iterable[_Union[_types_pb2.FgaRelationInput, _Mapping]]] = ...) -> None: ...

class ValidateSessionResponse(_message.Message):
    __slots__ = ("is_valid", "user")
    IS_VALID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    is_valid: bool
    user: _types_pb2.User
    def __init__(self, is_valid: _Optional[bool] = ..., user: _Optional[_Union[_types_pb2.User, _Mapping]] = ...) -> None: ...

class SkipMfaSetupRequest(_message.Message):
    __slots__ = ("email", "phone_number", "state")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    state: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class LockMfaRequest(_message.Message):
    __slots__ = ("email", "phone_number")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ...) -> None: ...

class LockMfaResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class EmailOtpMfaSetupRequest(_message.Message):
    __slots__ = ("email", "phone_number")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ...) -> None: ...

class EmailOtpMfaSetupResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class SmsOtpMfaSetupRequest(_message.Message):
    __slots__ = ("email", "phone_number")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ...) -> None: ...

class SmsOtpMfaSetupResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class TotpMfaSetupRequest(_message.Message):
    __slots__ = ("email", "phone_number")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ...) -> None: ...

class MetaRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckPermissionsRequest(_message.Message):
    __slots__ = ("checks", "user")
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[_types_pb2.PermissionCheckInput]
    user: str
    def __init__(self, checks: _Optional[_Iterable[_Union[_types_pb2.PermissionCheckInput, _Mapping]]] = ..., user: _Optional[str] = ...) -> None: ...

class CheckPermissionsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_types_pb2.PermissionCheckResult]
    def __init__(self, results: _Optional[_Iterable[_Union[_types_pb2.PermissionCheckResult, _Mapping]]] = ...) -> None: ...

class ListPermissionsRequest(_message.Message):
    __slots__ = ("relation", "object_type", "user", "context", "contextual_tuples")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXTUAL_TUPLES_FIELD_NUMBER: _ClassVar[int]
    relation: str
    object_type: str
    user: str
    context: _struct_pb2.Struct
    contextual_tuples: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaTupleInput]
    def __init__(self, relation: _Optional[str] = ..., object_type: _Optional[str] = ..., user: _Optional[str] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., contextual_tuples: _Optional[_Iterable[_Union[_types_pb2.FgaTupleInput, _Mapping]]] = ...) -> None: ...

class ListPermissionsResponse(_message.Message):
    __slots__ = ("objects", "permissions", "truncated")
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    objects: _containers.RepeatedScalarFieldContainer[str]
    permissions: _containers.RepeatedCompositeFieldContainer[_types_pb2.Permission]
    truncated: bool
    def __init__(self, objects: _Optional[_Iterable[str]] = ..., permissions: _Optional[_Iterable[_Union[_types_pb2.Permission, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class WebauthnCredentialInfo(_message.Message):
    __slots__ = ("id", "name", "transports", "created_at", "updated_at", "last_used_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRANSPORTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    transports: _containers.RepeatedScalarFieldContainer[str]
    created_at: int
    updated_at: int
    last_used_at: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., transports: _Optional[_Iterable[str]] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ..., last_used_at: _Optional[int] = ...) -> None: ...

class WebauthnRegistrationOptionsRequest(_message.Message):
    __slots__ = ("email", "phone_number")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    email: str
    phone_number: str
    def __init__(self, email: _Optional[str] = ..., phone_number: _Optional[str] = ...) -> None: ...

class WebauthnRegistrationOptionsResponse(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: str
    def __init__(self, options: _Optional[str] = ...) -> None: ...

class WebauthnRegistrationVerifyRequest(_message.Message):
    __slots__ = ("name", "credential", "email", "phone_number", "state")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    credential: str
    email: str
    phone_number: str
    state: str
    def __init__(self, name: _Optional[str] = ..., credential: _Optional[str] = ..., email: _Optional[str] = ..., phone_number: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class WebauthnLoginOptionsRequest(_message.Message):
    __slots__ = ("email",)
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    email: str
    def __init__(self, email: _Optional[str] = ...) -> None: ...

class WebauthnLoginOptionsResponse(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: str
    def __init__(self, options: _Optional[str] = ...) -> None: ...

class WebauthnLoginVerifyRequest(_message.Message):
    __slots__ = ("state", "credential")
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    state: str
    credential: str
    def __init__(self, state: _Optional[str] = ..., credential: _Optional[str] = ...) -> None: ...

class WebauthnCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WebauthnCredentialsResponse(_message.Message):
    __slots__ = ("webauthn_credentials",)
    WEBAUTHN_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    webauthn_credentials: _containers.RepeatedCompositeFieldContainer[WebauthnCredentialInfo]
    def __init__(self, webauthn_credentials: _Optional[_Iterable[_Union[WebauthnCredentialInfo, _Mapping]]] = ...) -> None: ...

class WebauthnDeleteCredentialRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WebauthnDeleteCredentialResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class WebauthnRenameCredentialRequest(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class WebauthnRenameCredentialResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("id", "created_at", "last_used_at", "ip", "user_agent", "current")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    IP_FIELD_NUMBER: _ClassVar[int]
    USER_AGENT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    created_at: int
    last_used_at: int
    ip: str
    user_agent: str
    current: bool
    def __init__(self, id: _Optional[str] = ..., created_at: _Optional[int] = ..., last_used_at: _Optional[int] = ..., ip: _Optional[str] = ..., user_agent: _Optional[str] = ..., current: _Optional[bool] = ...) -> None: ...

class SessionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ...) -> None: ...

class RevokeSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeSessionResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...
