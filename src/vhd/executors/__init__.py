"""Executors: where per-item work runs (`vhd.execution` holds the interface and the registry).

``local`` runs it in this process; ``ray`` on actors of a Ray cluster (`vhd.executors.ray_pool`).
Workflows find them by name through `vhd.execution.EXECUTORS`, never by importing this room.
"""
