"""The MCP face: every tool, resource, prompt and completion as a module-level async function that
takes the ``Face`` (the services it calls, who is calling, who is listening), registered on the
server by the one table in ``table``.

One module per family: ``memory_tools``, ``task_tools``, ``browse``, ``erasure``, ``golden``,
``resources``, ``prompts``, ``completions``; ``guards`` holds the server middlewares that refuse
unknown names and arguments, ``notify`` the resource subscriptions, ``server`` builds the MCPServer.

The wire shapes are the face's (``schemas``, ``task_schemas``, the text blocks in ``templates``);
``wire_memory``, ``wire_tasks`` and ``wire_upkeep`` build them from the services' domain records.
"""
