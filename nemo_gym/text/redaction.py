"""What a secret looks like when shown: the one mask, and URLs with their passwords taken out.

Kept apart from the config code so the HTTP client, which names URLs in its errors and logs, can use it too.
"""

from __future__ import annotations

import re

MASKED_VALUE = "****"

_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#@:]*)(?::(?P<password>[^\s/?#]*))?@"
)


def without_url_passwords(text: str) -> str:
    """`text` with the password of every URL in it masked; a user part alone is masked whole, since
    tokens are often passed that way (`https://<token>@host`)."""
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(
        lambda url: (
            f"{url['scheme']}{url['user']}:{MASKED_VALUE}@"
            if url["password"] is not None
            else f"{url['scheme']}{MASKED_VALUE}@"
        ),
        text,
    )
