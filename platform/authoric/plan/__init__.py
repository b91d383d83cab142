"""The plan layer: what a request asks for (access, filter tree, order, page) turned into the one
governed statement that answers it. REST, the SDK, bulk writes, CSV export, the feed's judge and
the console all build their SQL here; nothing else writes the governed clause."""
