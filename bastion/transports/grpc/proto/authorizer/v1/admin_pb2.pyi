from google.protobuf import struct_pb2 as _struct_pb2
from bastion.transports.grpc.proto.authorizer.v1 import common_pb2 as _common_pb2
from bastion.transports.grpc.proto.authorizer.v1 import pagination_pb2 as _pagination_pb2
from bastion.transports.grpc.proto.authorizer.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdminLoginRequest(_message.Message):
    __slots__ = ("admin_secret",)
    ADMIN_SECRET_FIELD_NUMBER: _ClassVar[int]
    admin_secret: str
    def __init__(self, admin_secret: _Optional[str] = ...) -> None: ...

class AdminLoginResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminLogoutRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminLogoutResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminSessionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminSessionResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminMetaRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminMetaResponse(_message.Message):
    __slots__ = ("admin_meta",)
    ADMIN_META_FIELD_NUMBER: _ClassVar[int]
    admin_meta: AdminMeta
    def __init__(self, admin_meta: _Optional[_Union[AdminMeta, _Mapping]] = ...) -> None: ...

class AdminMeta(_message.Message):
    __slots__ = ("roles", "default_roles", "protected_roles")
    ROLES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ROLES_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_ROLES_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[str]
    default_roles: _containers.RepeatedScalarFieldContainer[str]
    protected_roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, roles: _Optional[_Iterable[str]] = ..., default_roles: _Optional[_Iterable[str]] = ..., protected_roles: _Optional[_Iterable[str]] = ...) -> None: ...

class UsersRequest(_message.Message):
    __slots__ = ("pagination", "query")
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    query: str
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ..., query: _Optional[str] = ...) -> None: ...

class UsersResponse(_message.Message):
    __slots__ = ("users", "pagination")
    USERS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[_types_pb2.User]
    pagination: _pagination_pb2.Pagination
    def __init__(self, users: _Optional[_Iterable[_Union[_types_pb2.User, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class UserRequest(_message.Message):
    __slots__ = ("id", "email")
    ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    id: str
    email: str
    def __init__(self, id: _Optional[str] = ..., email: _Optional[str] = ...) -> None: ...

class UserResponse(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: _types_pb2.User
    def __init__(self, user: _Optional[_Union[_types_pb2.User, _Mapping]] = ...) -> None: ...

class UpdateUserRequest(_message.Message):
    __slots__ = ("id", "email", "email_verified", "given_name", "family_name", "middle_name", "nickname", "gender", "birthdate", "phone_number", "phone_number_verified", "picture", "roles", "is_multi_factor_auth_enabled", "app_data", "reset_mfa")
    ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    GIVEN_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_NAME_FIELD_NUMBER: _ClassVar[int]
    MIDDLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NICKNAME_FIELD_NUMBER: _ClassVar[int]
    GENDER_FIELD_NUMBER: _ClassVar[int]
    BIRTHDATE_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PHONE_NUMBER_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    PICTURE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    IS_MULTI_FACTOR_AUTH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    APP_DATA_FIELD_NUMBER: _ClassVar[int]
    RESET_MFA_FIELD_NUMBER: _ClassVar[int]
    id: str
    email: str
    email_verified: bool
    given_name: str
    family_name: str
    middle_name: str
    nickname: str
    gender: str
    birthdate: str
    phone_number: str
    phone_number_verified: bool
    picture: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    is_multi_factor_auth_enabled: bool
    app_data: _common_pb2.AppData
    reset_mfa: bool
    def __init__(self, id: _Optional[str] = ..., email: _Optional[str] = ..., email_verified: _Optional[bool] = ..., given_name: _Optional[str] = ..., family_name: _Optional[str] = ..., middle_name: _Optional[str] = ..., nickname: _Optional[str] = ..., gender: _Optional[str] = ..., birthdate: _Optional[str] = ..., phone_number: _Optional[str] = ..., phone_number_verified: _Optional[bool] = ..., picture: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., is_multi_factor_auth_enabled: _Optional[bool] = ..., app_data: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ..., reset_mfa: _Optional[bool] = ...) -> None: ...

class UpdateUserResponse(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: _types_pb2.User
    def __init__(self, user: _Optional[_Union[_types_pb2.User, _Mapping]] = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("email", "id")
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    email: str
    id: str
    def __init__(self, email: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class VerificationRequestsRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ...) -> None: ...

class VerificationRequestsResponse(_message.Message):
    __slots__ = ("verification_requests", "pagination")
    VERIFICATION_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    verification_requests: _containers.RepeatedCompositeFieldContainer[VerificationRequest]
    pagination: _pagination_pb2.Pagination
    def __init__(self, verification_requests: _Optional[_Iterable[_Union[VerificationRequest, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class VerificationRequest(_message.Message):
    __slots__ = ("id", "identifier", "token", "email", "expires", "created_at", "updated_at", "nonce", "redirect_uri")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    id: str
    identifier: str
    token: str
    email: str
    expires: int
    created_at: int
    updated_at: int
    nonce: str
    redirect_uri: str
    def __init__(self, id: _Optional[str] = ..., identifier: _Optional[str] = ..., token: _Optional[str] = ..., email: _Optional[str] = ..., expires: _Optional[int] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ..., nonce: _Optional[str] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class RevokeAccessRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class RevokeAccessResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class EnableAccessRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class EnableAccessResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class InviteMembersRequest(_message.Message):
    __slots__ = ("emails", "redirect_uri")
    EMAILS_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    emails: _containers.RepeatedScalarFieldContainer[str]
    redirect_uri: str
    def __init__(self, emails: _Optional[_Iterable[str]] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class InviteMembersResponse(_message.Message):
    __slots__ = ("message", "users")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    message: str
    users: _containers.RepeatedCompositeFieldContainer[_types_pb2.User]
    def __init__(self, message: _Optional[str] = ..., users: _Optional[_Iterable[_Union[_types_pb2.User, _Mapping]]] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("id", "event_name", "event_description", "endpoint", "enabled", "headers", "created_at", "updated_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    event_name: str
    event_description: str
    endpoint: str
    enabled: bool
    headers: _common_pb2.AppData
    created_at: int
    updated_at: int
    def __init__(self, id: _Optional[str] = ..., event_name: _Optional[str] = ..., event_description: _Optional[str] = ..., endpoint: _Optional[str] = ..., enabled: _Optional[bool] = ..., headers: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ...) -> None: ...

class WebhookLog(_message.Message):
    __slots__ = ("id", "http_status", "response", "request", "webhook_id", "created_at", "updated_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    http_status: int
    response: str
    request: str
    webhook_id: str
    created_at: int
    updated_at: int
    def __init__(self, id: _Optional[str] = ..., http_status: _Optional[int] = ..., response: _Optional[str] = ..., request: _Optional[str] = ..., webhook_id: _Optional[str] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ...) -> None: ...

class AddWebhookRequest(_message.Message):
    __slots__ = ("event_name", "event_description", "endpoint", "enabled", "headers")
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    event_name: str
    event_description: str
    endpoint: str
    enabled: bool
    headers: _common_pb2.AppData
    def __init__(self, event_name: _Optional[str] = ..., event_description: _Optional[str] = ..., endpoint: _Optional[str] = ..., enabled: _Optional[bool] = ..., headers: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ...) -> None: ...

class AddWebhookResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class UpdateWebhookRequest(_message.Message):
    __slots__ = ("id", "event_name", "event_description", "endpoint", "enabled", "headers")
    ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    id: str
    event_name: str
    event_description: str
    endpoint: str
    enabled: bool
    headers: _common_pb2.AppData
    def __init__(self, id: _Optional[str] = ..., event_name: _Optional[str] = ..., event_description: _Optional[str] = ..., endpoint: _Optional[str] = ..., enabled: _Optional[bool] = ..., headers: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ...) -> None: ...

class UpdateWebhookResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteWebhookResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class GetWebhookRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetWebhookResponse(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ...) -> None: ...

class WebhooksRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ...) -> None: ...

class WebhooksResponse(_message.Message):
    __slots__ = ("webhooks", "pagination")
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    webhooks: _containers.RepeatedCompositeFieldContainer[Webhook]
    pagination: _pagination_pb2.Pagination
    def __init__(self, webhooks: _Optional[_Iterable[_Union[Webhook, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class WebhookLogsRequest(_message.Message):
    __slots__ = ("pagination", "webhook_id")
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    webhook_id: str
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ..., webhook_id: _Optional[str] = ...) -> None: ...

class WebhookLogsResponse(_message.Message):
    __slots__ = ("webhook_logs", "pagination")
    WEBHOOK_LOGS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    webhook_logs: _containers.RepeatedCompositeFieldContainer[WebhookLog]
    pagination: _pagination_pb2.Pagination
    def __init__(self, webhook_logs: _Optional[_Iterable[_Union[WebhookLog, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class TestEndpointRequest(_message.Message):
    __slots__ = ("endpoint", "event_name", "event_description", "headers")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    event_name: str
    event_description: str
    headers: _common_pb2.AppData
    def __init__(self, endpoint: _Optional[str] = ..., event_name: _Optional[str] = ..., event_description: _Optional[str] = ..., headers: _Optional[_Union[_common_pb2.AppData, _Mapping]] = ...) -> None: ...

class TestEndpointResponse(_message.Message):
    __slots__ = ("http_status", "response")
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    http_status: int
    response: str
    def __init__(self, http_status: _Optional[int] = ..., response: _Optional[str] = ...) -> None: ...

class EmailTemplate(_message.Message):
    __slots__ = ("id", "event_name", "template", "design", "subject", "created_at", "updated_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    DESIGN_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    event_name: str
    template: str
    design: str
    subject: str
    created_at: int
    updated_at: int
    def __init__(self, id: _Optional[str] = ..., event_name: _Optional[str] = ..., template: _Optional[str] = ..., design: _Optional[str] = ..., subject: _Optional[str] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ...) -> None: ...

class AddEmailTemplateRequest(_message.Message):
    __slots__ = ("event_name", "subject", "template", "design")
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    DESIGN_FIELD_NUMBER: _ClassVar[int]
    event_name: str
    subject: str
    template: str
    design: str
    def __init__(self, event_name: _Optional[str] = ..., subject: _Optional[str] = ..., template: _Optional[str] = ..., design: _Optional[str] = ...) -> None: ...

class AddEmailTemplateResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class UpdateEmailTemplateRequest(_message.Message):
    __slots__ = ("id", "event_name", "template", "subject", "design")
    ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    DESIGN_FIELD_NUMBER: _ClassVar[int]
    id: str
    event_name: str
    template: str
    subject: str
    design: str
    def __init__(self, id: _Optional[str] = ..., event_name: _Optional[str] = ..., template: _Optional[str] = ..., subject: _Optional[str] = ..., design: _Optional[str] = ...) -> None: ...

class UpdateEmailTemplateResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class DeleteEmailTemplateRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteEmailTemplateResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class EmailTemplatesRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ...) -> None: ...

class EmailTemplatesResponse(_message.Message):
    __slots__ = ("email_templates", "pagination")
    EMAIL_TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    email_templates: _containers.RepeatedCompositeFieldContainer[EmailTemplate]
    pagination: _pagination_pb2.Pagination
    def __init__(self, email_templates: _Optional[_Iterable[_Union[EmailTemplate, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class AuditLog(_message.Message):
    __slots__ = ("id", "actor_id", "actor_type", "actor_email", "action", "resource_type", "resource_id", "ip_address", "user_agent", "metadata", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_EMAIL_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    IP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    USER_AGENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    actor_id: str
    actor_type: str
    actor_email: str
    action: str
    resource_type: str
    resource_id: str
    ip_address: str
    user_agent: str
    metadata: str
    created_at: int
    def __init__(self, id: _Optional[str] = ..., actor_id: _Optional[str] = ..., actor_type: _Optional[str] = ..., actor_email: _Optional[str] = ..., action: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_id: _Optional[str] = ..., ip_address: _Optional[str] = ..., user_agent: _Optional[str] = ..., metadata: _Optional[str] = ..., created_at: _Optional[int] = ...) -> None: ...

class AuditLogsRequest(_message.Message):
    __slots__ = ("pagination", "action", "actor_id", "resource_type", "resource_id", "from_timestamp", "to_timestamp", "resource")
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TO_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PaginationRequest
    action: str
    actor_id: str
    resource_type: str
    resource_id: str
    from_timestamp: int
    to_timestamp: int
    resource: str
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PaginationRequest, _Mapping]] = ..., action: _Optional[str] = ..., actor_id: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_id: _Optional[str] = ..., from_timestamp: _Optional[int] = ..., to_timestamp: _Optional[int] = ..., resource: _Optional[str] = ...) -> None: ...

class AuditLogsResponse(_message.Message):
    __slots__ = ("audit_logs", "pagination")
    AUDIT_LOGS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    audit_logs: _containers.RepeatedCompositeFieldContainer[AuditLog]
    pagination: _pagination_pb2.Pagination
    def __init__(self, audit_logs: _Optional[_Iterable[_Union[AuditLog, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.Pagination, _Mapping]] = ...) -> None: ...

class FgaModel(_message.Message):
    __slots__ = ("id", "dsl")
    ID_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    id: str
    dsl: str
    def __init__(self, id: _Optional[str] = ..., dsl: _Optional[str] = ...) -> None: ...

class FgaTuple(_message.Message):
    __slots__ = ("user", "relation", "object")
    USER_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    user: str
    relation: str
    object: str
    def __init__(self, user: _Optional[str] = ..., relation: _Optional[str] = ..., object: _Optional[str] = ...) -> None: ...

class FgaGetModelRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FgaGetModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: FgaModel
    def __init__(self, model: _Optional[_Union[FgaModel, _Mapping]] = ...) -> None: ...

class FgaWriteModelRequest(_message.Message):
    __slots__ = ("dsl",)
    DSL_FIELD_NUMBER: _ClassVar[int]
    dsl: str
    def __init__(self, dsl: _Optional[str] = ...) -> None: ...

class FgaWriteModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: FgaModel
    def __init__(self, model: _Optional[_Union[FgaModel, _Mapping]] = ...) -> None: ...

class FgaWriteTuplesRequest(_message.Message):
    __slots__ = ("tuples",)
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    tuples: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaTupleInput]
    def __init__(self, tuples: _Optional[_Iterable[_Union[_types_pb2.FgaTupleInput, _Mapping]]] = ...) -> None: ...

class FgaWriteTuplesResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class FgaDeleteTuplesRequest(_message.Message):
    __slots__ = ("tuples",)
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    tuples: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaTupleInput]
    def __init__(self, tuples: _Optional[_Iterable[_Union[_types_pb2.FgaTupleInput, _Mapping]]] = ...) -> None: ...

class FgaDeleteTuplesResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class FgaReadTuplesRequest(_message.Message):
    __slots__ = ("user", "relation", "object", "page_size", "continuation_token")
    USER_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    user: str
    relation: str
    object: str
    page_size: int
    continuation_token: str
    def __init__(self, user: _Optional[str] = ..., relation: _Optional[str] = ..., object: _Optional[str] = ..., page_size: _Optional[int] = ..., continuation_token: _Optional[str] = ...) -> None: ...

class FgaReadTuplesResponse(_message.Message):
    __slots__ = ("tuples", "continuation_token")
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tuples: _containers.RepeatedCompositeFieldContainer[FgaTuple]
    continuation_token: str
    def __init__(self, tuples: _Optional[_Iterable[_Union[FgaTuple, _Mapping]]] = ..., continuation_token: _Optional[str] = ...) -> None: ...

class FgaListUsersRequest(_message.Message):
    __slots__ = ("object", "relation", "user_type", "context", "contextual_tuples")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    USER_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXTUAL_TUPLES_FIELD_NUMBER: _ClassVar[int]
    object: str
    relation: str
    user_type: str
    context: _struct_pb2.Struct
    contextual_tuples: _containers.RepeatedCompositeFieldContainer[_types_pb2.FgaTupleInput]
    def __init__(self, object: _Optional[str] = ..., relation: _Optional[str] = ..., user_type: _Optional[str] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., contextual_tuples: _Optional[_Iterable[_Union[_types_pb2.FgaTupleInput, _Mapping]]] = ...) -> None: ...

class FgaListUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class FgaExpandRequest(_message.Message):
    __slots__ = ("relation", "object")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    relation: str
    object: str
    def __init__(self, relation: _Optional[str] = ..., object: _Optional[str] = ...) -> None: ...

class FgaExpandResponse(_message.Message):
    __slots__ = ("tree",)
    TREE_FIELD_NUMBER: _ClassVar[int]
    tree: str
    def __init__(self, tree: _Optional[str] = ...) -> None: ...

class FgaResetRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FgaResetResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminWebauthnCredentialInfo(_message.Message):
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

class AdminWebauthnCredentialsRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class AdminWebauthnCredentialsResponse(_message.Message):
    __slots__ = ("webauthn_credentials",)
    WEBAUTHN_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    webauthn_credentials: _containers.RepeatedCompositeFieldContainer[AdminWebauthnCredentialInfo]
    def __init__(self, webauthn_credentials: _Optional[_Iterable[_Union[AdminWebauthnCredentialInfo, _Mapping]]] = ...) -> None: ...

class AdminWebauthnDeleteCredentialRequest(_message.Message):
    __slots__ = ("user_id", "id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class AdminWebauthnDeleteCredentialResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminSessionInfo(_message.Message):
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

class AdminUserSessionsRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class AdminUserSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[AdminSessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[AdminSessionInfo, _Mapping]]] = ...) -> None: ...

class AdminRevokeUserSessionRequest(_message.Message):
    __slots__ = ("user_id", "id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    id: str
    def __init__(self, user_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class AdminRevokeUserSessionResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class AdminRevokeAllUserSessionsRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class AdminRevokeAllUserSessionsResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...
