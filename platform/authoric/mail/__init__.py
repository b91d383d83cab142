"""Mail: the durable outbox, the mails' wording, and the sender that delivers them."""
