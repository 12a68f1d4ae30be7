"""Offline multi-hop answers (router/chain_answer.py): pure units over invented passages, no database."""
from __future__ import annotations

from router.chain_answer import chain_answer
from router.types import Passage


def p(n: int, title: str, text: str, heading: str = "") -> Passage:
    return Passage(n, f"doc{n}.md", title, heading or title, text)


# An incident names its service; the owning team's page lists it in a table under "Services owned"
# (the relation is in the heading, not the row); the team page names its lead and, in another
# section, the person who owns its incident reviews.
INCIDENT_CHAIN = [
    p(1, "Incident review INC-2031-004: label printing stalled", "- **Date:** 3 March 2031\n"
      "- **Service:** Label Printer, region eu-west"),
    p(2, "Fulfilment team", "| Service | Tier |\n|---|---|\n| Label Printer | 2 |\n| Pick List | 3 |",
      "Fulfilment team > Services owned"),
    p(3, "Fulfilment team", "The Fulfilment team builds the warehouse tools.\n\n- **Team lead:** Omar Haddad\n"
      "- **Engineers:** 6"),
    p(4, "Fulfilment team", "Petra Lind is the team's incident review owner.",
      "Fulfilment team > Working agreements"),
]


def test_a_section_heading_states_how_the_page_subject_relates_to_the_rows_it_lists():
    got = chain_answer("Who leads the team that owns the service that failed in incident INC-2031-004?",
                       INCIDENT_CHAIN)
    assert got.chain[:3] == ["INC-2031-004", "Label Printer", "Fulfilment team"], got.text


def test_a_relation_an_earlier_hop_or_its_heading_stated_does_not_pick_the_last_hop():
    # "incident" was stated by the first hop's page and "owns" by the second hop's heading: the last
    # hop is the one stating "leads", not the sentence repeating "incident ... owner"
    got = chain_answer("Who leads the team that owns the service that failed in incident INC-2031-004?",
                       INCIDENT_CHAIN)
    assert got.reached and got.chain[-1] == "Omar Haddad", got.text
    assert [pick.passage for pick in got.picked] == [1, 2, 3]  # one citation per hop


TWO_PARTS = [
    p(1, "Label Printer", "The Label Printer renders shipping labels. **Owner: Fulfilment team** (`#team-fulfilment`)."),
    p(2, "Fulfilment team", "- **Team lead:** Omar Haddad\n- **Engineers:** 6"),
    p(3, "Lisbon office", "The Lisbon office opened in 2024. Omar Haddad and most warehouse engineers work here."),
]


def test_a_two_part_question_goes_on_from_the_first_answer_to_the_second():
    got = chain_answer("Who leads the team that owns the Label Printer, and in which office does he work?", TWO_PARTS)
    assert got.reached and got.chain == ["Label Printer", "Fulfilment team", "Omar Haddad", "Lisbon office"], got.text
    assert got.text.startswith("Omar Haddad; Lisbon office.")
    assert [pick.passage for pick in got.picked] == [1, 2, 3]


def test_a_two_part_question_is_not_reached_while_its_second_part_is_open():
    # the planner searches on from the first answer (router/planner_offline.py) until the office is found
    got = chain_answer("Who leads the team that owns the Label Printer, and in which office does he work?", TWO_PARTS[:2])
    assert not got.reached and got.chain[-1] == "Omar Haddad" and got.text.startswith("Omar Haddad.")


def test_a_name_after_also_known_as_is_the_same_thing_and_leads_nowhere_new():
    album = [p(1, "Harbour Lights", 'Harbour Lights, also known as "Night Ferry", is a live album by the band '
                                    "Tidewater."),
             p(2, "Tidewater", "Tidewater is a folk band formed in Lisbon in 1998.")]
    got = chain_answer("Where did the band form that made the live album Harbour Lights?", album)
    assert got.chain[:2] == ["Harbour Lights", "Tidewater"] and "Night Ferry" not in got.chain, got.text
