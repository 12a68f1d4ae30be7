"""vector"""
