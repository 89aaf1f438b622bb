"""The warm `ask`: one background process keeps what a question needs between commands.

Each ``mindscape ask`` from a terminal used to load the embedder, open the store and start the
local model, answer, and throw all of it away. The *warm process* keeps them: it answers
``ask`` requests from the command line over a Unix socket, so the second and later questions
cost the answer and not the start-up.

* :mod:`mindscape.serve.warm.common`: where its files live (a private per-user runtime directory),
  the line protocol, and the fingerprints that tell a stale process, settings or store.
* :mod:`mindscape.serve.warm.server`: the process (``mindscape serve`` runs it in the foreground;
  ``ask`` starts it detached: ``python -m mindscape.commands.serve``). It runs the very
  function ``ask`` runs in-process (:func:`mindscape.commands.ask.answer_here`, handed to it
  by its caller), one question at a time, and sends back what it prints
  and returns, so both paths give the same answers.
* :mod:`mindscape.serve.warm.client`: what ``ask``, ``serve --status`` and ``serve --stop`` use.
  Any fault (a process that died, hangs or runs another version) ends in an in-process
  answer with one line saying why.
"""

from __future__ import annotations
