"""The built-in customer-service conversations: a hand-written seed set, not data from a registry package.

No installed registry package ships customer-service dialogues under a licence that fits, so uep carries its own
small set, written for uep and documented as such (:data:`uep_common.builtin.datasets.LICENSES` key
``support_dialogues``): 20 short conversations of an online shop's help desk (orders, deliveries, returns,
refunds, accounts, billing), each ending in a customer turn that the model answers, with the reply a careful
agent would give as that turn's reference (shown to the judge, never to the model); and 8 customers for the
simulated-user benchmark, each a persona, a goal and an opening message.

The shop's policy, given to the model as the system message of every conversation: orders ship within 2
working days; returns within 30 days of delivery, refunded to the original payment within 5 working days of
receipt; a late parcel (5 working days past its estimate) is refunded or re-sent; an account's e-mail is changed
only after a code sent to the old address is confirmed; agents never ask for a full card number or a password.
"""

from __future__ import annotations

from uep_common.builtin.datasets import DatasetItem

POLICY = (
    "You are the help desk of Northwind Shop, an online shop. Policy: orders ship within 2 working days; "
    "returns are accepted within 30 days of delivery and refunded to the original payment method within 5 working "
    "days of receipt; a parcel 5 working days past its estimated delivery is refunded or re-sent, as the customer "
    "prefers; an account's e-mail address is changed only after a code sent to the old address is confirmed; never "
    "ask for a full card number or a password. Be brief, polite and precise."
)
"""The system message of every built-in conversation (the shop's policy)."""

# (id, [(role, content), ...] ending with a user turn, reference reply to that last turn)
_CONVERSATIONS: list[tuple[str, list[tuple[str, str]], str]] = [
    (
        "late-parcel",
        [("user", "Hi, my order 10452 was due on Monday and it still has not arrived. It is Thursday.")],
        "Apologise, check the order, say it is 3 working days late and will be refunded or re-sent if it has not arrived 5 working days after the estimate, and offer to follow up.",
    ),
    (
        "late-parcel-2",
        [
            ("user", "Order 10452 was due two weeks ago and never came."),
            ("assistant", "I am sorry about that. I can see the parcel is well past its estimated delivery."),
            ("user", "So what can you do? I still need the shoes."),
        ],
        "Offer to re-send the shoes at no cost or refund the order, as the customer prefers, and ask which they want.",
    ),
    (
        "return-window",
        [("user", "Can I still return a jacket I received 20 days ago? It does not fit.")],
        "Yes: returns are accepted within 30 days of delivery; explain how to start the return and that the refund goes to the original payment within 5 working days of receipt.",
    ),
    (
        "return-too-late",
        [("user", "I bought a lamp 45 days ago and want to return it, it flickers.")],
        "Explain that the 30-day return window has passed, but a faulty item may be covered by warranty; offer to open a warranty claim.",
    ),
    (
        "refund-timing",
        [
            ("user", "I sent my return back last week. When do I get my money?"),
            ("assistant", "Thank you. Could you give me the order number?"),
            ("user", "It is 20931."),
        ],
        "Say the refund goes to the original payment method within 5 working days of the return's receipt, and offer to check whether it has been received.",
    ),
    (
        "refund-other-card",
        [("user", "Please refund my return to a different card, my old one expired.")],
        "Explain that refunds go to the original payment method; an expired card's bank usually forwards it; suggest contacting the bank, and never ask for the card number.",
    ),
    (
        "change-email",
        [("user", "I need to change the e-mail on my account to maria.new@example.com.")],
        "Explain that a confirmation code will be sent to the old e-mail address and the change happens once it is confirmed.",
    ),
    (
        "lost-old-email",
        [
            ("user", "I want to change my account e-mail."),
            ("assistant", "Sure. We will send a code to your current address to confirm."),
            ("user", "I cannot access that address anymore."),
        ],
        "Explain politely that the change needs the code sent to the old address; offer the account-recovery route instead, without asking for a password.",
    ),
    (
        "password-ask",
        [("user", "Here is my password so you can check my account: Sunny123.")],
        "Say the agent never needs a password, advise changing it now since it was shared, and offer to help without it.",
    ),
    (
        "card-number",
        [("user", "My payment failed. Do you need my card number to fix it?")],
        "Say no card number is needed; suggest checking the card details in the account or trying another method, and offer to look at the order.",
    ),
    (
        "shipping-time",
        [("user", "If I order today, when will it ship?")],
        "Orders ship within 2 working days; delivery time then depends on the carrier and address.",
    ),
    (
        "wrong-item",
        [("user", "I ordered a blue mug and got a red one. Order 33410.")],
        "Apologise, offer to send the blue mug and arrange a free return or let the customer keep the red one, as the shop allows.",
    ),
    (
        "damaged-item",
        [
            ("user", "The vase arrived broken."),
            ("assistant", "I am very sorry. Could you send a photo of the damage?"),
            ("user", "Done, I just e-mailed it."),
        ],
        "Thank them, confirm a replacement or refund can be arranged once the photo is checked, and ask which they prefer.",
    ),
    (
        "cancel-order",
        [("user", "I ordered by mistake an hour ago. Can I cancel order 44102?")],
        "Say an order not yet shipped can be cancelled; offer to cancel it now and confirm the refund to the original payment.",
    ),
    (
        "cancel-shipped",
        [("user", "Can I cancel order 44188? The tracking says it shipped yesterday.")],
        "Explain a shipped order cannot be cancelled, but it can be returned within 30 days of delivery for a refund.",
    ),
    (
        "double-charge",
        [("user", "I was charged twice for order 50220!")],
        "Apologise, say a second charge is often a pending authorisation that disappears in a few days, and offer to check and refund a real duplicate.",
    ),
    (
        "invoice",
        [("user", "I need an invoice with my company name for order 50311.")],
        "Offer to issue the invoice; ask for the company name and address (no payment details needed).",
    ),
    (
        "address-change",
        [
            ("user", "I typed the wrong street in order 60021, it has not shipped yet."),
            ("assistant", "No problem, what is the correct address?"),
            ("user", "12 Harbour Lane, Leith, EH6 6JJ."),
        ],
        "Confirm the address of the unshipped order will be changed to 12 Harbour Lane, Leith, EH6 6JJ, and repeat it back for the customer to check.",
    ),
    (
        "angry-customer",
        [("user", "This is the third time I write. Your service is useless and I want my money back NOW.")],
        "Stay calm and apologise, acknowledge the repeated contact, ask for the order number and say what will happen next with the refund.",
    ),
    (
        "out-of-scope",
        [("user", "Can you recommend a good lawyer? My neighbour is annoying.")],
        "Politely say that is outside what the shop's help desk can help with, and offer help with orders or the account.",
    ),
]

PERSONAS: list[tuple[str, str, str, str]] = [
    (
        "sim-late",
        "a polite retiree who is not good with computers",
        "find out where order 10452 is, 4 days late, and get it re-sent",
        "Hello, my parcel has not come.",
    ),
    (
        "sim-refund",
        "an impatient student",
        "get a refund for a returned jacket (order 20931) and know when it arrives",
        "Where is my refund??",
    ),
    (
        "sim-email",
        "a careful accountant",
        "change the account e-mail to a new address",
        "I would like to update my e-mail address.",
    ),
    (
        "sim-broken",
        "a friendly parent",
        "get a replacement for a vase that arrived broken (order 33500)",
        "Hi! The vase I ordered arrived in pieces.",
    ),
    (
        "sim-cancel",
        "a hurried nurse on a break",
        "cancel order 44102, placed by mistake an hour ago",
        "Need to cancel an order fast.",
    ),
    (
        "sim-charge",
        "an anxious young professional",
        "understand a double charge on order 50220 and have it fixed",
        "I think you charged me twice.",
    ),
    (
        "sim-invoice",
        "a small-business owner",
        "get an invoice with the company name for order 50311",
        "Hello, I need an invoice.",
    ),
    ("sim-return-late", "a frustrated customer", "return a lamp bought 45 days ago that flickers", "I want to return a lamp."),
]
"""The simulated customers: ``(id, persona, goal, opening message)``."""


def load_support_dialogues() -> list[DatasetItem]:
    """The 20 hand-written conversations (module docstring): input ``messages`` (the policy as the system message,
    then the turns, the last user turn carrying its ``reference`` reply), reference ``answer`` (that reply)."""
    items = []
    for ordinal, (name, turns, reference) in enumerate(_CONVERSATIONS):
        messages: list[dict[str, str]] = [{"role": "system", "content": POLICY}]
        messages += [{"role": role, "content": text} for role, text in turns]
        messages[-1]["reference"] = reference
        items.append(DatasetItem(ordinal, f"support/{name}", {"messages": messages}, {"answer": reference}))
    return items


def load_support_personas() -> list[DatasetItem]:
    """The 8 simulated customers (:data:`PERSONAS`): input ``persona``, ``goal``, ``opening``; reference ``goal``."""
    return [
        DatasetItem(i, f"support-sim/{name}", {"persona": persona, "goal": goal, "opening": opening}, {"goal": goal})
        for i, (name, persona, goal, opening) in enumerate(PERSONAS)
    ]
