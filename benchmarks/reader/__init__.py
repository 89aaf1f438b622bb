"""The local reader alone: its ceiling, its variants, its windows, its confidence, its adapter."""
