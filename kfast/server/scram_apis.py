"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51):
Kafka's KafkaApis / ControllerApis handlers.

* Describe answers from the broker's metadata image (the committed
  UserScramCredentialRecords): no users (null or empty) lists every user with
  a credential; a named user without one is RESOURCE_NOT_FOUND, a user named
  twice DUPLICATE_RESOURCE, with Kafka's messages. It needs DESCRIBE on the
  cluster.
* Alter goes to the controller (ScramControlManager; forwarded by a
  cluster's broker), which validates each user; it needs ALTER on the
  cluster. A refused authorization is CLUSTER_AUTHORIZATION_FAILED: the
  top-level error of Describe, every user's error of Alter.
"""

from __future__ import annotations

from kfast.protocol import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import ACL_OPERATION_ALTER, ACL_OPERATION_DESCRIBE
from kfast.server.apis import ApiRegistry, RequestContext

_NOT_FOUND = "Attempt to describe a user credential that does not exist: "
_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "


def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    credentials = ctx.broker.metadata_image.scram_credentials
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism_type), credential in sorted(credentials.items()):
        by_user.setdefault(user, []).append((mechanism_type, credential.iterations))
    named = [u.name for u in request.users or ()]
    duplicates = {name for name in named if named.count(name) > 1}
    wanted = list(dict.fromkeys(named)) if named else sorted(by_user)
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = DescribeUserScramCredentialsResponse.CredentialInfo
    results: list[DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult] = []
    for user in wanted:
        if user in duplicates:
            results.append(
                Result(
                    user=user,
                    error_code=errors.DuplicateResourceException.code,
                    error_message=_DUPLICATE + user,
                    credential_infos=[],
                )
            )
        elif user not in by_user:
            results.append(
                Result(
                    user=user,
                    error_code=errors.ResourceNotFoundException.code,
                    error_message=_NOT_FOUND + user,
                    credential_infos=[],
                )
            )
        else:
            results.append(
                Result(
                    user=user,
                    error_code=0,
                    error_message=None,
                    credential_infos=[Info(mechanism=m, iterations=i) for m, i in by_user[user]],
                )
            )
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)


def _describe_error(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest, error: errors.KafkaError
) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(
        error_code=error.code, error_message=str(error) or None, results=[]
    )


async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    results: list[tuple[str, errors.KafkaError | None]]
    results = await ctx.broker.controller.alter_user_scram_credentials(
        [(d.name, d.mechanism) for d in request.deletions],
        [
            (u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
            for u in request.upsertions
        ],
    )
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    return AlterUserScramCredentialsResponse(
        results=[
            Result(
                user=user,
                error_code=0 if error is None else error.code,
                error_message=None if error is None else str(error) or None,
            )
            for user, error in results
        ]
    )


def _alter_error(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest, error: errors.KafkaError
) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    return AlterUserScramCredentialsResponse(
        results=[
            Result(user=user, error_code=error.code, error_message=str(error) or None)
            for user in users
        ]
    )


def register(apis: ApiRegistry) -> None:
    apis.register(
        api_keys.BY_NAME["DescribeUserScramCredentials"].key,
        handle_describe_user_scram_credentials,
        error_response=_describe_error,
    )
    apis.register(
        api_keys.BY_NAME["AlterUserScramCredentials"].key,
        handle_alter_user_scram_credentials,
        error_response=_alter_error,
    )
