"""The shared core every layer may import, and which imports no layer: ids and domain models
(``ids``, ``models``, the task model ``task_model``), errors, strict JSON numbers (``numbers``),
text handling (``text``, ``nesting``), the checkpoint envelope, the caution notes and the prompt
files (``prompt_files``); and, until they move to the MCP face, the memory tools' shapes
(``schemas``). Nothing here imports the MCP SDK, a driver or a model.
"""
