"""kfast.client resolves its public names on first use (PEP 562), so the
broker, which needs only the connection and security layers for its own
links, does not import the admin, producer and fetcher layers at start-up."""

import json
import subprocess
import sys

import pytest

import kfast.client


def test_every_public_name_resolves_to_its_module():
    for name in kfast.client.__all__:
        value = getattr(kfast.client, name)
        home = kfast.client._HOMES[name]
        assert value is getattr(__import__(f"kfast.client.{home}", fromlist=[name]), name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = kfast.client.NoSuchThing


def test_the_broker_does_not_import_the_client_layers_it_does_not_use():
    code = (
        "import json, sys, kfast.server.broker, kfast.server.controller_server;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kfast.client.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = json.loads(out)
    for layer in ("admin", "producer", "fetcher", "blocking"):
        assert f"kfast.client.{layer}" not in loaded, loaded
