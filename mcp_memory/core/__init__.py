"""The shared core every layer may import, and which imports no layer: ids and domain models
(``ids``, ``models``), errors, text handling (``text``, ``nesting``), the checkpoint envelope and
the caution notes, and the shapes of the tools' inputs and outputs and of their text blocks
(``schemas``, ``task_schemas``, ``templates``; services still speak them, until they move to the
MCP face). Nothing here imports the MCP SDK, a driver or a model.
"""
