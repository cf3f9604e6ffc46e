"""The tutor around the walk: quiz questions made from a scenario's own numbers (quiz.py), the quiz
as a learner meets it (session.py), and what the learner has walked and scored (progress.py).

May import the layer, text and render; the commands call it.
"""
