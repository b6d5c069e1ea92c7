"""The pure semantics: the sequential store and the background writer, as
pure steps with contracts. They import nothing but each other and the
standard library."""
