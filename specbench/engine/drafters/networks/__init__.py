"""Trained network drafters: the registry entry they derive from, the shared feature layers, Medusa, EAGLE, MTP, DSpark and JetSpec heads."""
