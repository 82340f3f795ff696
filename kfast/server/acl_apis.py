"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): Kafka's AclApis.

* Every one first checks the principal's right on the cluster: DESCRIBE for
  DescribeAcls, ALTER for CreateAcls and DeleteAcls
  (CLUSTER_AUTHORIZATION_FAILED as the whole response otherwise).
* Without an authorizer (``authorizer.class.name`` empty) each answers
  SECURITY_DISABLED: DescribeAcls in its top-level error, CreateAcls and
  DeleteAcls in every result (their getErrorResponse).
* DescribeAcls answers from the broker's authorizer (the committed ACLs),
  grouped by resource pattern. CreateAcls and DeleteAcls go to the
  controller (AclControlManager), which validates each ACL / filter:
  INVALID_REQUEST with Kafka's message for an UNKNOWN or ANY part, a
  CLUSTER resource not named kafka-cluster, an empty name, a principal with
  no ``type:`` prefix, an UNKNOWN filter. Version 0 carries no pattern type
  (LITERAL); a filter of v0 that says ANY means LITERAL, as Kafka's
  DescribeAclsRequest / DeleteAclsRequest normalise it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfast.protocol import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_ALTER,
    ACL_OPERATION_DESCRIBE,
    PATTERN_TYPE_ANY,
    PATTERN_TYPE_LITERAL,
)
from kfast.security.acl import Acl, AclFilter
from kfast.server.apis import ApiRegistry, RequestContext

if TYPE_CHECKING:
    from kfast.security.authorizer import StandardAuthorizer

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _authorizer(ctx: RequestContext) -> StandardAuthorizer | None:
    authorizer: StandardAuthorizer | None = getattr(ctx.broker, "authorizer", None)
    return authorizer


def _filter(
    ctx: RequestContext, f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter
) -> AclFilter:
    pattern_type = f.pattern_type_filter
    if ctx.api_version == 0 and pattern_type == PATTERN_TYPE_ANY:
        pattern_type = PATTERN_TYPE_LITERAL
    return AclFilter(
        f.resource_type_filter,
        f.resource_name_filter,
        pattern_type,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return DescribeAclsResponse(
            error_code=errors.SecurityDisabledException.code, error_message=_NO_AUTHORIZER
        )
    acl_filter = _filter(ctx, request)
    if acl_filter.is_unknown():
        return DescribeAclsResponse(
            error_code=errors.InvalidRequestException.code,
            error_message="Filter contain UNKNOWN elements",
        )
    # (resource type, name, pattern type): its ACLs
    resources: dict[tuple[int, str, int], list[Acl]] = {}
    for acl in authorizer.acls(acl_filter):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            acl
        )
    return DescribeAclsResponse(
        resources=[
            DescribeAclsResponse.DescribeAclsResource(
                resource_type=rtype,
                resource_name=name,
                pattern_type=pattern_type,
                acls=[
                    DescribeAclsResponse.AclDescription(
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in acls
                ],
            )
            for (rtype, name, pattern_type), acls in resources.items()
        ]
    )


def _describe_error(
    ctx: RequestContext, request: DescribeAclsRequest, error: errors.KafkaError
) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=error.code, error_message=str(error) or None)


async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    if _authorizer(ctx) is None:
        return _create_error(ctx, request, errors.SecurityDisabledException(_NO_AUTHORIZER))
    acls = [
        Acl(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type if ctx.api_version >= 1 else PATTERN_TYPE_LITERAL,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]
    results: list[errors.KafkaError | None] = await ctx.broker.controller.create_acls(acls)
    return CreateAclsResponse(
        results=[
            CreateAclsResponse.AclCreationResult(
                error_code=0 if error is None else error.code,
                error_message=None if error is None else str(error) or None,
            )
            for error in results
        ]
    )


def _create_error(
    ctx: RequestContext, request: CreateAclsRequest, error: errors.KafkaError
) -> CreateAclsResponse:
    return CreateAclsResponse(
        results=[
            CreateAclsResponse.AclCreationResult(
                error_code=error.code, error_message=str(error) or None
            )
            for _ in request.creations
        ]
    )


async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    if _authorizer(ctx) is None:
        return _delete_error(ctx, request, errors.SecurityDisabledException(_NO_AUTHORIZER))
    filters = [_filter(ctx, f) for f in request.filters]
    results: list[tuple[errors.KafkaError | None, list[Acl]]]
    results = await ctx.broker.controller.delete_acls(filters)
    matching = DeleteAclsResponse.DeleteAclsMatchingAcl
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=0 if error is None else error.code,
                error_message=None if error is None else str(error) or None,
                matching_acls=[
                    matching(
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in deleted
                ],
            )
            for error, deleted in results
        ]
    )


def _delete_error(
    ctx: RequestContext, request: DeleteAclsRequest, error: errors.KafkaError
) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=error.code, error_message=str(error) or None
            )
            for _ in request.filters
        ]
    )


def register(apis: ApiRegistry) -> None:
    apis.register(
        api_keys.BY_NAME["DescribeAcls"].key, handle_describe_acls, error_response=_describe_error
    )
    apis.register(
        api_keys.BY_NAME["CreateAcls"].key, handle_create_acls, error_response=_create_error
    )
    apis.register(
        api_keys.BY_NAME["DeleteAcls"].key, handle_delete_acls, error_response=_delete_error
    )
