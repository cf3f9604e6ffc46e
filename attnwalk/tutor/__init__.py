"""The tutor around the walk: quiz questions made from a scenario's own numbers (quiz.py), and
what the learner has walked and scored (progress.py) with its view (progressview.py), and the
predictions and questions on gradients (gradquiz.py).

May import the layer, the scenario's data, text, render and attnwalk.atomic (progress is written
whole); the commands call it.
"""
