"""The embedded authorization engine's operations (check, list, expand, model and tuple
administration) over this process's view of the store. The graph itself is pure,
:mod:`core.fga`. The facade is :class:`service.fga.service.FgaService`.
"""
