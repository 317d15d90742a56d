"""The code map: what each file defines, imports and names, resolved to a graph across files.

Intake parses every file in scope with tree-sitter (``extract``: definitions with their line spans, imports,
references and the strings that may name other files) in the same processes that read and hash it; once
every file is known, ``resolve`` turns the names into edges between files, each carrying the definitions it
reaches and the lines it reaches them from. Only what a simple rule can tell is kept: an import that resolves,
a name defined in one place, a receiver named after the module or class that defines the method, a string that
is the path of a template or configuration file. A name that could mean several things is dropped.

Packing (``engine.packets``) follows the weighted graph, chunks of a large file end at definitions
(``cuts``), and every review packet carries its part of the map (``packet_map``): the definitions its files
call elsewhere, with the lines that guard them, and the places elsewhere that call its files.
"""
