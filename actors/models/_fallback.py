"""`FallbackModel`: a primary model, and others to try in turn when a provider fails."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any, Self

from actors._logging import get_logger
from actors.exceptions import (
    Cancelled,
    ModelAuthenticationError,
    ModelError,
    ModelFallbackError,
    ModelHTTPError,
    ModelRequestsDisabled,
    UnsupportedContentError,
    UserError,
)
from actors.models._model import (
    Model,
    ModelFallback,
    ModelRequest,
    ModelResponse,
    StreamDelta,
)

__all__ = ["FallbackModel", "is_provider_failure"]

_log = get_logger("actors.models")

# Statuses that say "not now" rather than "not this request": worth another provider.
_PASSING = frozenset({408, 409, 425, 429})


def is_provider_failure(error: BaseException) -> bool:
    """Whether another model may well succeed where this error happened (the default rule).

    Yes: rate limits (429), overload and server errors (5xx, 529), request timeouts (408) and
    conflicts (409, 425), model timeouts, dropped or refused connections, replies that could
    not be understood. No: a request the provider refused as wrong (400, 404, 413, 422: the
    next model would get the same request), refused credentials (401, 403: a configuration to
    fix), real requests switched off, a cancelled run, and anything that is not a
    `ModelError` (a bug, or a scripted test failure of another type).
    """
    if isinstance(error, ModelAuthenticationError | ModelRequestsDisabled):
        return False
    if isinstance(error, ModelHTTPError):
        return error.status_code in _PASSING or error.status_code >= 500
    return isinstance(error, ModelError)


class FallbackModel:
    """A model that tries ``primary``, then each of ``others`` in turn, on provider failures.

    Each model runs its own retries first (an HTTP model's `RetryPolicy`); when it still fails
    with an error ``fallback_on`` accepts (by default `is_provider_failure`: rate limits, 5xx,
    timeouts, dropped connections — never a 4xx caller mistake), the next model gets the same
    request. Every switch is recorded in the agent's log as a ``model_fallback`` event (the
    failing model's name, the error's type and message, the next model's name). When the last
    model fails too, the run fails with `ModelFallbackError`, which holds every model's error.
    An error no other model should be tried for (a 400, refused credentials) ends the request
    as it is, or, after a switch, as a `ModelFallbackError`.

    The agent's ``model_timeout`` bounds the whole chain, not each model. A model that fails
    after it has streamed part of its reply to ``request.on_delta`` is not replaced: listeners
    have already seen part of its answer, so its error goes to the run. A cancelled run is
    never passed on.

    A model that does not take the request's content (an image to a text-only model, audio to
    Claude) refuses it before sending with `UnsupportedContentError`; the next model is then
    tried whatever ``fallback_on`` says, and the switch is recorded like any other. When no
    model takes the content, the request fails with `UnsupportedContentError`, naming what
    each refused.

    Args:
        primary: The model to ask first: a `Model`, or a string for `infer_model`.
        *others: The models to fall back to, in order.
        fallback_on: Decides from an error whether to try the next model.

    Example:
        >>> from actors.testing import ScriptedModel
        >>> model = FallbackModel(ScriptedModel([], name="a"), ScriptedModel([], name="b"))
        >>> model.name
        'fallback:a,b'
    """

    def __init__(
        self,
        primary: Model | str,
        *others: Model | str,
        fallback_on: Callable[[BaseException], bool] = is_provider_failure,
    ) -> None:
        models = [_resolve(model) for model in (primary, *others)]
        if not callable(fallback_on):
            raise UserError(f"fallback_on must be a function of an error, got {fallback_on!r}")
        self._models: tuple[Model, ...] = tuple(models)
        self._fallback_on = fallback_on

    @property
    def name(self) -> str:
        """``"fallback:<first>,<second>,..."``: every model's name, in order."""
        return "fallback:" + ",".join(model.name for model in self._models)

    @property
    def models(self) -> tuple[Model, ...]:
        """The models, in the order they are tried."""
        return self._models

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask each model in turn until one answers.

        Raises:
            ModelFallbackError: After a switch, the last model failed too, or a model failed in
                a way the next one should not be tried for (its error is the ``__cause__``).
            ModelError: The first model failed in a way no other model should be tried for:
                its own error, unchanged.
            UnsupportedContentError: No model takes the request's content; none was asked.
            Cancelled: The run was cancelled.
        """
        switches: list[ModelFallback] = []
        failures: list[tuple[str, BaseException]] = []
        for position, model in enumerate(self._models):
            streamed = False

            def on_delta(delta: StreamDelta, forward: Any = request.on_delta) -> None:
                nonlocal streamed
                streamed = True
                forward(delta)

            attempt = request
            if request.on_delta is not None:
                attempt = dataclasses.replace(request, on_delta=on_delta)
            try:
                response = await model.request(attempt)
            except Cancelled:
                raise
            except Exception as error:
                failures.append((model.name, error))
                last = position == len(self._models) - 1
                refused = isinstance(error, UnsupportedContentError)  # nothing was sent
                if last and all(isinstance(e, UnsupportedContentError) for _, e in failures):
                    if len(failures) == 1:
                        raise
                    raise _refused_by_all(failures) from error
                wanted = refused or self._wants(error)
                if last or streamed or request.cancellation.cancelled or not wanted:
                    if not switches:
                        raise  # nothing was tried instead: the model's own error, as it is
                    raise self._exhausted(failures, last=last) from error
                following = self._models[position + 1].name
                switches.append(ModelFallback.of(model.name, error, following))
                _log.info(
                    "model.fallback",
                    agent_id=request.agent_id,
                    model=model.name,
                    error=type(error).__name__,
                    next_model=following,
                )
                continue
            if switches:
                return dataclasses.replace(
                    response, fallbacks=(*tuple(switches), *response.fallbacks)
                )
            return response
        raise AssertionError("unreachable: a FallbackModel holds at least one model")

    def _wants(self, error: BaseException) -> bool:
        try:
            return bool(self._fallback_on(error))
        except Exception:  # a broken predicate must not hide the model's error
            _log.warning("fallback_on raised; not falling back", exc_info=True)
            return False

    def _exhausted(
        self, failures: list[tuple[str, BaseException]], *, last: bool
    ) -> ModelFallbackError:
        parts = "; ".join(f"{name}: {type(error).__name__}: {error}" for name, error in failures)
        why = "every model failed" if last else "a model failed and the next one was not tried"
        return ModelFallbackError(f"{self.name}: {why} ({parts})", failures=failures)

    async def aclose(self) -> None:
        """Close every model that has something to close (their HTTP clients)."""
        closers = [close() for m in self._models if callable(close := getattr(m, "aclose", None))]
        results = await asyncio.gather(*closers, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                _log.warning("closing a model failed", model=self.name, exc_info=result)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(model) for model in self._models)})"


def _refused_by_all(failures: list[tuple[str, BaseException]]) -> UnsupportedContentError:
    first = failures[0][1]
    assert isinstance(first, UnsupportedContentError)
    reasons = "; ".join(f"{error}" for _, error in failures)
    return UnsupportedContentError(
        f"no model takes the request's content: {reasons}",
        ",".join(name for name, _ in failures),
        first.part,
        first.media_type,
        first.accepted,
    )


def _resolve(model: Model | str) -> Model:
    if isinstance(model, str):
        from actors.models._infer import infer_model  # imports the HTTP providers: on demand

        return infer_model(model)
    if not isinstance(model, Model):
        raise UserError(
            f"FallbackModel takes models (or model strings such as 'openai:gpt-4o'), got {model!r}"
        )
    return model
