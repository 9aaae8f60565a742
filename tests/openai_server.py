"""The loopback OpenAI-compatible server the API tests run against (it lives in the library,
``unsure.engine.openai_server``, so that the shadow run can start it too)."""

from unsure.engine.openai_server import LocalModel, Server

__all__ = ["LocalModel", "Server"]
