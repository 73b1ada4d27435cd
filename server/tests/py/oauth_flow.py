"""The Python SDK's own OAuth client against `serve --oauth` through a tunnel:
it discovers the resource and the authorization server from a 401, registers
itself (RFC 7591), sends the owner to /authorize with PKCE, and the owner
answers the consent page: once with a wrong owner key (refused), then with
the right one. Then the tools work with the access token, a second
connection reuses the stored token with no new consent, and a refresh
token is honoured.

usage: oauth_flow.py <mcp url> <owner key> <auto|legacy>"""

import asyncio
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
import mcp
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from harness import call


class Memory:
    """TokenStorage in memory, shared by both connections."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def form_token(page):
    found = re.search(r'name="form" value="([^"]+)"', page.text)
    assert found, f"no consent form in {page.status_code}: {page.text[:300]}"
    return found.group(1)


async def main(url, owner_key, mode):
    origin = f"{urlparse(url).scheme}://{urlparse(url).netloc}"
    captured = {}
    consents = []

    async def redirect_handler(authorization_url):
        consents.append(authorization_url)
        async with httpx2.AsyncClient() as browser:
            page = await browser.get(authorization_url)
            assert page.status_code == 200, page.text
            assert "Allow an MCP client" in page.text and "http://127.0.0.1:9/callback" in page.text, page.text
            wrong = await browser.post(
                f"{origin}/consent",
                data={"form": form_token(page), "owner_key": "x" * len(owner_key), "action": "allow"},
                headers={"Origin": origin},
            )
            assert wrong.status_code == 403, wrong.text
            page = await browser.get(authorization_url)
            elsewhere = await browser.post(
                f"{origin}/consent",
                data={"form": form_token(page), "owner_key": owner_key, "action": "allow"},
                headers={"Origin": "https://evil.example"},
            )
            assert elsewhere.status_code == 403, "another site's form is refused"
            page = await browser.get(authorization_url)
            approved = await browser.post(
                f"{origin}/consent",
                data={"form": form_token(page), "owner_key": owner_key, "action": "allow"},
                headers={"Origin": origin},
            )
            assert approved.status_code == 303, approved.text
            back = await browser.get(urljoin(origin, approved.headers["location"]))
            assert back.status_code in (302, 303), f"{back.status_code} {back.text}"
            redirect = urlparse(back.headers["location"])
            assert f"{redirect.scheme}://{redirect.netloc}{redirect.path}" == "http://127.0.0.1:9/callback"
            query = parse_qs(redirect.query)
            assert "code" in query, back.headers["location"]
            captured.update(code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0])
            # The ticket was single-use: the same request asks again.
            again = await browser.get(urljoin(origin, approved.headers["location"]))
            assert again.status_code == 200 and "Allow an MCP client" in again.text

    async def callback_handler():
        return AuthorizationCodeResult(**captured)

    storage = Memory()
    # The default registration (client_secret_basic) on one run, a public
    # client (PKCE only) on the other.
    metadata = OAuthClientMetadata(
        client_name="oauth-flow test",
        redirect_uris=["http://127.0.0.1:9/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=None if mode == "auto" else "none",
    )

    def provider():
        return OAuthClientProvider(
            server_url=url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )

    async def connect_and_use(title):
        async with httpx2.AsyncClient(auth=provider(), timeout=30) as http:
            async with mcp.Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                tools = await client.list_tools()
                assert len(tools.tools) == 40, len(tools.tools)
                run = await call(client, "run_create", {"title": title, "attribution": "capability_only"})
                assert run["root_capability"].startswith("cap_"), run

    await connect_and_use("oauth first")
    assert len(consents) == 1, consents
    assert storage.tokens is not None and storage.tokens.refresh_token, storage.tokens
    await connect_and_use("oauth again")
    assert len(consents) == 1, "the stored token was reused"

    # The refresh token gets a new access token (rotation: the old one is spent).
    old = storage.tokens
    async with httpx2.AsyncClient() as plain:
        meta = (await plain.get(f"{origin}/.well-known/oauth-authorization-server")).json()
        form = {"grant_type": "refresh_token", "refresh_token": old.refresh_token}
        auth = None
        if storage.client_info.client_secret:
            auth = (storage.client_info.client_id, storage.client_info.client_secret)
        else:
            form["client_id"] = storage.client_info.client_id
        fresh = await plain.post(meta["token_endpoint"], data=form, auth=auth)
        assert fresh.status_code == 200, fresh.text
        assert fresh.json()["access_token"] != old.access_token
        spent = await plain.post(meta["token_endpoint"], data=form, auth=auth)
        assert spent.status_code == 400, "a refresh token is single-use"
    print(f"oauth over {mode}: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
