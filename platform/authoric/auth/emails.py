"""Email addresses as the platform takes them: one address, trimmed and in lower case.

Every body that names an address to create an account for, to invite, or to mail (sign-up,
resend, forgot, an invitation, the operator's new user) takes `Email`. An address is one
addr-spec as browsers check `<input type="email">` (the HTML standard's "valid email
address"): no display name, no comments, no quoting, no list. So `,` `;` `<` `>` `"` `(` `)`
`[` `]` `\\` and white space never get through, and an address can never become two
recipients, or a header, when a mail is composed for it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

MAX_EMAIL_CHARS = 320
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
# Surrounding white space is allowed, and trimmed; the address itself has none.
EMAIL_PATTERN = (r"^\s*[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@" + _LABEL + r"(?:\." + _LABEL
                 + r")*\s*$")


def normalized_email(email: str) -> str:
    """The address as it is kept and compared: trimmed, in lower case."""
    return email.strip().lower()


Email = Annotated[str, Field(pattern=EMAIL_PATTERN, max_length=MAX_EMAIL_CHARS),
                  AfterValidator(normalized_email)]
