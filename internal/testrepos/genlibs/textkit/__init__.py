"""textkit: small string utilities."""
from .core import slugify, title_case, wrap, count_words, is_palindrome, truncate
from .cases import snake_to_camel, camel_to_snake, kebab
