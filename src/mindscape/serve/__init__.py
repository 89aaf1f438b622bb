"""Serving: the processes that answer from outside a one-off ``mindscape ask``.

:mod:`.warm` keeps the models loaded between asks (``mindscape serve``); :mod:`.mcp` offers
the books as MCP tools (``mindscape mcp``); :mod:`.dev` runs ``langgraph dev`` and the chat
page beside it (``mindscape ui``). Each answers through the graphs' own entry point
(:func:`mindscape.graphs.ask.ask`).
"""
