"""Small pieces around the judge: the inference service's /internal/generate request checks, and the
hybrid routing rule of the scorer."""

import httpx

from uep_inference.backends import Backends
from uep_inference.http_api import PATH, make_generate_endpoint
from uep_inference.limits import ModelLimits
from uep_inference.settings import InferenceSettings
from uep_scorer.scoring import hybrid_route_reason

TOKEN = "service-token-for-tests"


async def test_generate_endpoint_refuses_callers_without_the_service_credential():
    app = make_generate_endpoint(Backends(), ModelLimits(), InferenceSettings(internal_token=TOKEN))
    body = {"target": {"model_id": "x"}, "prompt": "hi"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inference") as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}):
            r = await client.post(PATH, json=body, headers=headers)
            assert r.status_code == 401, headers
            assert r.json()["detail"][0]["loc"] == ["header", "Authorization"]
        # the right token gets past the credential check to the body's validation
        r = await client.post(PATH, json={"prompt": "hi"}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 422
    closed = make_generate_endpoint(Backends(), ModelLimits(), InferenceSettings(internal_token=""))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=closed), base_url="http://inference") as client:
        assert (await client.post(PATH, json=body, headers={"Authorization": "Bearer "})).status_code == 503


async def test_generate_endpoint_refuses_malformed_requests_naming_the_field():
    app = make_generate_endpoint(Backends(), ModelLimits(), InferenceSettings(internal_token=TOKEN))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://inference", headers=auth) as client:
        r = await client.post(PATH, json={"prompt": "hi"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "target"]
        r = await client.post(PATH, json={"target": {"model_id": "x"}, "prompt": ""})
        assert r.status_code == 422 and {tuple(p["loc"][:2]) for p in r.json()["detail"]} >= {
            ("body", "target"),
            ("body", "prompt"),
        }
        assert (await client.get(PATH)).status_code == 405


def test_hybrid_route_reason():
    assert hybrid_route_reason(True, "explicit") is None and hybrid_route_reason(False, None) is None
    assert hybrid_route_reason(False, "no_answer") == "no_answer"
    assert hybrid_route_reason(None, None) == "free_form"
