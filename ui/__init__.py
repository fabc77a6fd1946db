"""What the pages of every app share: cells, links, lists and their tables, filters' parts.

It imports the apps' models and nothing else of theirs, so that any page may import it
without joining the apps in a cycle (docs/architecture.md: Layers and who may import whom).
"""
