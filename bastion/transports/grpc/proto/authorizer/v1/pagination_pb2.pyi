from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PaginationRequest(_message.Message):
    __slots__ = ("page", "limit", "page_token")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page: int
    limit: int
    page_token: str
    def __init__(self, page: _Optional[int] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Pagination(_message.Message):
    __slots__ = ("limit", "page", "offset", "total", "next_page_token")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    limit: int
    page: int
    offset: int
    total: int
    next_page_token: str
    def __init__(self, limit: _Optional[int] = ..., page: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ..., next_page_token: _Optional[str] = ...) -> None: ...
