"""The network face: the gateway that serves SSE and streamable HTTP (``gateway``), the ASGI
middlewares in front of the SDK's app (``middlewares``), the body and capacity checks (``body``,
``capacity``), bearer JWTs (``jwt_auth``), and the ``mcp-memory connect`` relay to a remote server
(``bridge``). A stdio server imports none of it.
"""
