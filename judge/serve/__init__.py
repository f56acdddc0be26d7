"""``judge-serve``: the judge as an HTTP service (FastAPI, dynamic batching, an OpenAI-compatible route,
Prometheus metrics, Ray Serve replicas).

Layout: ``config`` (:class:`ServeConfig`), ``service`` (the loaded judge, request items to records),
``batcher`` (the bounded queue and its worker), ``app`` (the routes), ``chat`` (chat completions),
``server`` (uvicorn, SIGTERM drain), ``ray`` (the Ray Serve deployment), ``metrics``.
"""
