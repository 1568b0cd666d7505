"""Model providers over HTTP: OpenAI Chat Completions (and compatible servers), Anthropic.

Every model here speaks the `actors._model.Model` protocol: ``await model.request(request)``
returns one complete `ModelResponse`, streaming pieces to ``request.on_delta`` on the way.
Requests go through one `httpx.AsyncClient` per model (async, because the runtime sends all
model requests from one asyncio loop thread), retried by a `RetryPolicy` on rate limits,
server errors, dropped connections and timeouts. Failures come out as the typed errors of
`actors.exceptions` (`ModelHTTPError`, `ModelAuthenticationError`, `ModelTimeoutError`,
`UnexpectedModelResponse`), and a cancelled run closes its request in flight.

Example:
    >>> from actors.models import infer_model
    >>> infer_model("anthropic:claude-sonnet-4-5").name
    'anthropic:claude-sonnet-4-5'
"""

from actors.models._anthropic import AnthropicModel
from actors.models._arguments import INVALID_ARGUMENTS_KEY
from actors.models._infer import KNOWN_PROVIDERS, infer_model
from actors.models._openai import OpenAIChatModel
from actors.models._retry import RetryPolicy

__all__ = [
    "AnthropicModel",
    "infer_model",
    "INVALID_ARGUMENTS_KEY",
    "KNOWN_PROVIDERS",
    "OpenAIChatModel",
    "RetryPolicy",
]
