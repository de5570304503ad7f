"""The answer to one request: candidates on one server (`single`) and on several hosts (`topology`, `search`,
`multi`), their common record (`base`), and the words that explain the binding bound (`explain`)."""
