"""The tree's consistency check and its safe repairs (``manage.py check_tree``)."""
