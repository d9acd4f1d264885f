"""The specification: numbered clauses (SPEC.md), typed interfaces and shared values.

``spec`` imports nothing from the other folders of this project.
"""
