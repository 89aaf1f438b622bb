"""Model files and the processes that serve them.

Everything about weights on disk lives here: the cache directory (:mod:`.cache`), the local
GGUF model's install and checks (:mod:`.local`), llama.cpp's server process
(:mod:`.server`, its watchdog child :mod:`._serve`, its entry point :mod:`.llama_server`),
the reader adapter (:mod:`.adapter`, :mod:`.lora`) and the sha256 manifest every trained
artefact ships with (:mod:`.manifest`).
The chat clients that talk to a server are in :mod:`mindscape.llm`.
"""
