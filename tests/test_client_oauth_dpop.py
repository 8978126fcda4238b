"""DPoP (RFC 9449) in mcp_client's OAuth flows, against an authorization server and an MCP server on
loopback that verify each proof with the public key it carries (tests/oauth_support.py)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcp_client import (
    AsyncClient,
    ClientCredentialsProvider,
    HTTPTransport,
    InMemoryTokenStorage,
    InvalidCredentials,
    OAuthError,
    Provider,
    TokenError,
)

from .oauth_support import Answer, Browser, Hit, World

REDIRECT_URI = "http://127.0.0.1:8765/callback"
NONCE = "server-nonce-1"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict) -> str:
    """RFC 7638, computed here independently of the client's code."""
    members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    return b64(hashlib.sha256(members.encode()).digest())


def verify(proof: str, method: str, url: str) -> tuple[dict, dict]:
    """The proof's header and claims, its signature checked with the key its header carries."""
    header = jwt.get_unverified_header(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"]
    key = jwt.PyJWK(header["jwk"], algorithm="ES256").key
    claims = jwt.decode(proof, key, algorithms=["ES256"])
    assert claims["htm"] == method and claims["htu"] == url
    assert abs(claims["iat"] - time.time()) < 60 and claims["jti"]
    return header, claims


class DPoPWorld(World):
    """The World with DPoP: the AS binds tokens to the proof's key (``bound``) and the MCP server
    takes ``Authorization: DPoP`` with a proof by that key carrying ``ath``; each may ask for a nonce."""

    def __init__(self) -> None:
        super().__init__()
        self.metadata["dpop_signing_alg_values_supported"] = ["ES256", "RS256"]
        self.as_nonce: str | None = None
        self.rs_nonce: str | None = None
        self.issue_bearer = False
        self.bound: dict[str, str] = {}  # access token -> the thumbprint it is bound to

    def token(self, hit: Hit) -> Answer:
        proof = hit.headers.get("dpop")
        if proof is None:
            return super().token(hit)
        header, claims = verify(proof, "POST", self.server.url("/token"))
        if self.as_nonce is not None and claims.get("nonce") != self.as_nonce:
            return Answer(400, {"error": "use_dpop_nonce"}, {"dpop-nonce": self.as_nonce})
        answer = super().token(hit)
        if answer.status == 200 and not self.issue_bearer:
            answer.body["token_type"] = "DPoP"
            self.bound[answer.body["access_token"]] = thumbprint(header["jwk"])
        return answer

    def mcp(self, hit: Hit) -> Answer:
        scheme, _, token = hit.headers.get("authorization", "").partition(" ")
        if scheme != "DPoP":
            return super().mcp(hit)
        header, claims = verify(hit.headers["dpop"], "POST", self.mcp_url)
        assert claims["ath"] == b64(hashlib.sha256(token.encode()).digest())
        assert self.bound[token] == thumbprint(header["jwk"])
        if self.rs_nonce is not None and claims.get("nonce") != self.rs_nonce:
            return Answer(401, {"error": "use_dpop_nonce"},
                          {"www-authenticate": 'DPoP error="use_dpop_nonce"', "dpop-nonce": self.rs_nonce})
        # The rest is the World's resource server, which reads a Bearer header.
        as_bearer = {**hit.headers, "authorization": f"Bearer {token}"}
        return super().mcp(dataclasses.replace(hit, headers=as_bearer))


@pytest.fixture
def world():
    world = DPoPWorld()
    yield world
    world.close()


def code_provider(**options: object) -> Provider:
    browser = Browser()
    return Provider(client_metadata={"client_name": "tests", "redirect_uris": [REDIRECT_URI]},
                    redirect_handler=browser.redirect, callback_handler=browser.callback, **options)


async def tools_of(world: World, oauth: object) -> list[str]:
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=oauth))
    try:
        await client.connect(mode="legacy")  # the World's MCP server speaks the handshake era
        return [tool.name for tool in await client.tools()]
    finally:
        await client.close()


def p256_pem() -> bytes:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@pytest.mark.feature("OAUTH-34")
async def test_an_advertising_server_gets_proofs_and_the_token_goes_with_the_dpop_scheme(world):
    storage = InMemoryTokenStorage()
    assert await tools_of(world, code_provider(storage=storage)) == ["echo"]
    exchange = world.server.of("POST", "/token")[0]
    header, _ = verify(exchange.headers["dpop"], "POST", world.server.url("/token"))
    key = thumbprint(header["jwk"])
    authorized = [hit for hit in world.server.of("POST", "/mcp") if "authorization" in hit.headers]
    assert len(authorized) == 3  # initialize, initialized, tools/list
    jtis = set()
    for hit in authorized:
        assert hit.headers["authorization"] == "DPoP at-1"
        proof_header, claims = verify(hit.headers["dpop"], "POST", world.mcp_url)
        assert thumbprint(proof_header["jwk"]) == key and "nonce" not in claims
        jtis.add(claims["jti"])
    assert len(jtis) == 3  # a fresh proof each time
    tokens = await storage.tokens()
    assert tokens["token_type"] == "DPoP" and tokens["dpop_jkt"] == key


@pytest.mark.feature("OAUTH-34")
async def test_each_server_nonce_is_answered_by_one_retry_and_then_kept(world):
    world.as_nonce, world.rs_nonce = NONCE, "rs-nonce-7"
    assert await tools_of(world, code_provider()) == ["echo"]
    exchanges = world.server.of("POST", "/token")
    assert len(exchanges) == 2
    _, first = verify(exchanges[0].headers["dpop"], "POST", world.server.url("/token"))
    _, second = verify(exchanges[1].headers["dpop"], "POST", world.server.url("/token"))
    assert "nonce" not in first and second["nonce"] == NONCE and first["jti"] != second["jti"]
    authorized = [hit for hit in world.server.of("POST", "/mcp") if "dpop" in hit.headers]
    nonces = [verify(hit.headers["dpop"], "POST", world.mcp_url)[1].get("nonce") for hit in authorized]
    # initialize is challenged once and retried; later requests carry the nonce from the start.
    assert nonces == [NONCE, "rs-nonce-7", "rs-nonce-7", "rs-nonce-7"]


@pytest.mark.feature("OAUTH-34")
async def test_a_nonce_demanded_again_is_not_retried_in_a_loop(world):
    world.server.routes[("POST", "/token")] = lambda hit: Answer(
        400, {"error": "use_dpop_nonce"}, {"dpop-nonce": "always-wrong"})
    with pytest.raises(TokenError, match="use_dpop_nonce"):
        await tools_of(world, code_provider())
    assert len(world.server.of("POST", "/token")) == 2  # the first try and one retry


@pytest.mark.feature("OAUTH-34")
async def test_without_advertisement_bearer_and_dpop_true_insists(world):
    del world.metadata["dpop_signing_alg_values_supported"]
    assert await tools_of(world, code_provider()) == ["echo"]
    assert "dpop" not in world.server.of("POST", "/token")[0].headers
    assert all("dpop" not in hit.headers for hit in world.server.of("POST", "/mcp"))
    # dpop=True sends proofs anyway (the DPoPWorld honours them) ...
    key = p256_pem()
    assert await tools_of(world, code_provider(dpop=True, dpop_key=key)) == ["echo"]
    header, _ = verify(world.server.of("POST", "/token")[1].headers["dpop"], "POST",
                       world.server.url("/token"))
    public = serialization.load_pem_private_key(key, None).public_key().public_numbers()
    assert header["jwk"]["x"] == b64(public.x.to_bytes(32, "big"))
    # ... and refuses a Bearer token, which the default accepts.
    world.issue_bearer = True
    with pytest.raises(TokenError, match="only DPoP-bound tokens"):
        await tools_of(world, code_provider(dpop=True))
    world.metadata["dpop_signing_alg_values_supported"] = ["RS256"]
    with pytest.raises(TokenError, match="without ES256"):
        await tools_of(world, code_provider(dpop=True))


@pytest.mark.feature("OAUTH-34")
async def test_dpop_false_refuses_a_dpop_token_and_bad_options_are_refused(world):
    def dpop_anyway(hit: Hit) -> Answer:
        answer = World.token(world, hit)
        answer.body["token_type"] = "DPoP"
        return answer
    world.server.routes[("POST", "/token")] = dpop_anyway
    with pytest.raises(TokenError, match="without a DPoP proof"):
        await tools_of(world, code_provider(dpop=False))
    assert "dpop" not in world.server.of("POST", "/token")[0].headers
    with pytest.raises(ValueError, match="dpop=False"):
        code_provider(dpop=False, dpop_key=p256_pem())
    with pytest.raises(ValueError, match="dpop must be"):
        code_provider(dpop="yes")
    with pytest.raises(InvalidCredentials, match="not a PEM"):
        code_provider(dpop_key="nonsense")
    rsa_pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(InvalidCredentials, match="P-256"):
        code_provider(dpop_key=rsa_pem)


@pytest.mark.feature("OAUTH-34")
async def test_tokens_bound_to_another_key_are_not_presented(world):
    storage = InMemoryTokenStorage()
    assert await tools_of(world, code_provider(storage=storage)) == ["echo"]
    # Another provider with its own key shares the storage: the stored token is useless to it.
    assert await tools_of(world, code_provider(storage=storage)) == ["echo"]
    assert len(world.server.of("GET", "/authorize")) == 2
    assert (await storage.tokens())["access_token"] == "at-2"
    # The same key given again (dpop_key) reuses the stored token.
    key = p256_pem()
    assert await tools_of(world, code_provider(storage=storage, dpop_key=key)) == ["echo"]
    assert await tools_of(world, code_provider(storage=storage, dpop_key=key)) == ["echo"]
    assert len(world.server.of("GET", "/authorize")) == 3


@pytest.mark.feature("OAUTH-34")
async def test_client_credentials_and_a_refresh_carry_proofs(world):
    world.as_nonce = NONCE
    storage = InMemoryTokenStorage()
    provider = ClientCredentialsProvider(client_id="machine", client_secret="s", storage=storage)
    assert await tools_of(world, provider) == ["echo"]
    grant = world.server.of("POST", "/token")[-1]
    assert grant.form["grant_type"] == "client_credentials"
    assert verify(grant.headers["dpop"], "POST", world.server.url("/token"))[1]["nonce"] == NONCE
    assert (await storage.tokens())["token_type"] == "DPoP"
    # An expired token is refreshed with a proof carrying the kept nonce (no second challenge).
    tokens = await storage.tokens()
    await storage.save_tokens({**tokens, "expires_at": time.time() - 1})
    before = len(world.server.of("POST", "/token"))
    assert await tools_of(world, provider) == ["echo"]
    refresh = world.server.of("POST", "/token")[before:]
    assert [hit.form["grant_type"] for hit in refresh] == ["refresh_token"]
    assert verify(refresh[0].headers["dpop"], "POST", world.server.url("/token"))[1]["nonce"] == NONCE


@pytest.mark.feature("OAUTH-34")
async def test_a_resource_server_nonce_demanded_again_ends_in_an_error(world):
    world.rs_nonce = "rs-nonce"
    world.server.routes[("POST", "/mcp")] = lambda hit: (
        world.mcp(hit) if "dpop" not in hit.headers else
        Answer(401, {"error": "use_dpop_nonce"},
               {"www-authenticate": 'DPoP error="use_dpop_nonce"', "dpop-nonce": "rs-nonce"}))
    with pytest.raises(OAuthError):
        await tools_of(world, code_provider())
