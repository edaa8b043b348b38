"""parsekit: a tokenizer, an ini parser and small expression evaluation."""
from .tokens import tokenize, Token
from .ini import parse_ini, IniError
